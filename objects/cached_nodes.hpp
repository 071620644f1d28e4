#pragma once
// CachedNodes (docs/objects.md, "CachedNodes"): a Cached object for a graph that grows while
// every process reads all of it on its own copy, as a shared search tree does. It lives in a
// shared region of its own:
//
//   nodes     records written once by the process that makes them, in that process's arena:
//             [Head: edges | first edge | stamp][payload]; a node lies inside one block
//   links     one region atomic word per edge: 0, or a node of this generation (tagged with
//             it), set once by CAS
//   counters  one word per edge and process, plain region words; a process's words are its
//             stripe, added to only by its own threads with the CPU's atomics and read by all:
//             sum() adds this process's words as they are and the others' as of its last acquire;
//             refresh() and summed() keep the others' sum of a node's edges in this process's
//             memory from one synchronization to the next (a search reads a node's every edge
//             at every visit; the others' words change only at an acquire)
//   words     a few region atomic words for the program's own counters
//
// A node's bytes reach another process with its maker's next release (sync): until a process's
// copy shows the node's stamp, a link to it reads as taken but not here yet. The bytes never
// change after, so a process remembers a link it once saw ready. reset() starts a generation:
// the last one's links read as none, every stripe is zeroed, the arenas start over.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "loom/coherence/space.hpp"
#include "loom/objects/context.hpp"

namespace loom::objects {

class CachedNodes {
 public:
  using Node = uint64_t;  // a node's byte offset in the region; 0 is none
  struct Options {
    size_t edges = size_t{1} << 20;       // edges of all nodes of one generation (< 2^32)
    size_t arena_bytes = size_t{8} << 20;  // each process's node bytes per generation
    size_t block_size = size_t{64} << 10;  // the region's (a power of two, at least a page)
    size_t words = 8;                      // the program's region atomic words (at most 64)
  };
  struct Head {
    uint32_t edges;
    uint32_t first;  // the node's first edge
    uint64_t stamp;  // stamp(generation, node): a copy from before the node says otherwise
  };
  // An edge's link as this process sees it: `node` when linked and here; `taken` with no node
  // when linked but the node's bytes have not reached this process yet.
  struct Link {
    Node node = 0;
    bool taken = false;
  };

  // Collective (one thread per process); every process passes the same options (checked).
  CachedNodes(Context& ctx, const Options& o);
  // Collective: the region goes once nobody uses it.
  ~CachedNodes();
  CachedNodes(const CachedNodes&) = delete;
  CachedNodes& operator=(const CachedNodes&) = delete;

  size_t edges() const { return edges_; }
  size_t processes() const { return np_; }

  // Collective, one thread per process, nobody using the nodes: a new generation.
  void reset();
  // A node with `edges` edges and `payload` bytes, written by fill(std::byte*) in this
  // process's arena; 0 when the arena or the generation's edges are used up. Any thread.
  template <typename Fill>
  Node make(uint32_t edges, size_t payload, Fill fill) {
    std::lock_guard<std::mutex> g(mu_);
    const Node n = place(edges, payload);
    if (n == 0) return 0;
    std::byte* p = reinterpret_cast<std::byte*>(sp_.writing(r_->base() + n, sizeof(Head) + payload));
    // The payload and the head before the stamp (a releasing store, last): another thread of
    // this process may publish the block between the stores, and a version that shows the
    // stamp must hold the rest.
    fill(p + sizeof(Head));
    const Head h{edges, static_cast<uint32_t>(next_edge_), stamp(n)};
    std::memcpy(p, &h, offsetof(Head, stamp));
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p + offsetof(Head, stamp))).store(h.stamp, std::memory_order_release);
    next_edge_ += edges;
    return n;
  }
  // A node this process holds (made here, or a link's node): its head and payload.
  Head head(Node n) const {
    Head h;
    std::memcpy(&h, r_->base() + n, sizeof h);
    return h;
  }
  const std::byte* payload(Node n) const { return reinterpret_cast<const std::byte*>(r_->base() + n + sizeof(Head)); }

  // The edge's link if this process saw it ready before (no region operation).
  Node known(uint64_t edge) const { return node_of(known_[edge].load(std::memory_order_acquire)); }
  // The edge's link word, read now (a region atomic load).
  Link look(uint64_t edge);
  // Links the edge to n (made here) unless it has a link of this generation: whether it did.
  bool link(uint64_t edge, Node n);

  // Adds to this process's counter of the edge (the CPU's atomic, relaxed). Any thread.
  void add(uint64_t edge, uint64_t delta) {
    std::atomic_ref<uint64_t>(counters_[mine_ + edge]).fetch_add(delta, std::memory_order_relaxed);
  }
  // The others' words of node h's edges summed again when this process synchronized (sync,
  // sync_all, reset) since they were last summed; one thread sums a node, and others reading its
  // sums meanwhile see old and new ones (statistics, not data). Any thread.
  void refresh(const Head& h);
  // Edges whose others' words refresh summed, since the object was made (any thread).
  uint64_t refreshed_edges() const { return refreshed_edges_.load(std::memory_order_relaxed); }
  // The edge's counters: this process's word as it is, the others' as of the node's last refresh.
  uint64_t summed(uint64_t edge) const {
    return std::atomic_ref<uint64_t>(counters_[mine_ + edge]).load(std::memory_order_relaxed) + others_[edge].load(std::memory_order_relaxed);
  }
  // The edge's counters over every process's stripe, read now.
  uint64_t sum(uint64_t edge) const {
    uint64_t s = 0;
    for (size_t p = 0; p < np_; ++p) s += std::atomic_ref<uint64_t>(counters_[p * edges_ + edge]).load(std::memory_order_relaxed);
    return s;
  }

  // The program's region atomic word i (< Options::words).
  coherence::AtomicRef word(size_t i);
  // This thread: this process's writes released, the others' released ones acquired (one
  // releasing, acquiring fetch_add on a shared word). Any thread.
  void sync();
  // Collective, one thread per process: every process's writes so far, released and acquired
  // by all.
  void sync_all();

 private:
  static constexpr uint64_t kTagShift = 40;  // link word: generation << 40 | (node + 1)
  static constexpr uint64_t kClaim = 4096;   // edges a process takes from the counter at a time
  static constexpr size_t kOwnWords = 4;     // [0, 2] the edge counters (by generation), [3] syncs

  Node node_of(uint64_t link) const {
    return (link >> kTagShift) == generation_ ? (link & ((uint64_t{1} << kTagShift) - 1)) - 1 : 0;
  }
  uint64_t stamp(Node n) const;
  bool stamped(Node n) const;
  // Room for a node in this process's arena and its edges (under mu_), or 0.
  Node place(uint32_t edges, size_t payload);
  coherence::AtomicRef edge_counter(uint32_t generation);

  Context& ctx_;
  coherence::Space& sp_;
  size_t edges_, words_, np_;
  size_t mine_;  // this process's stripe: its first counter's index
  region::Region* r_ = nullptr;
  uint64_t* links_ = nullptr;
  uint64_t* words_at_ = nullptr;
  uint64_t* counters_ = nullptr;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::mutex mu_;  // this process's arena and edge claims
  size_t arena_used_ = 0;
  uint64_t next_edge_ = 0, limit_edge_ = 0;
  uint32_t generation_ = 0;
  std::unique_ptr<std::atomic<uint64_t>[]> known_;  // links this process saw ready (tagged)
  // The epoch: this process's synchronizations so far, counted after each one's acquire (a
  // releasing add that refresh's acquiring load pairs with).
  std::atomic<uint64_t> epoch_{1};
  std::atomic<uint64_t> refreshed_edges_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> others_;      // per edge: the others' words at its node's last refresh
  std::unique_ptr<std::atomic<uint64_t>[]> summed_at_;   // per node, at its first edge: the epoch of its last refresh
};

}  // namespace loom::objects
