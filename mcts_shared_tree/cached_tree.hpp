#pragma once
// The `cached-shared` tree policy (docs/mcts.md): the tree lives in a shared region, and every
// worker of every process descends all of it on its process's cached copies.
//
//   nodes      plain region memory, written once by the process that made them (its own arena):
//              [edges | stats base | pad][move x edges]
//   children   region atomic words, one per edge: 0, or the child's offset, tagged with the
//              search's epoch, set by CAS; the node's bytes reach the others with the maker's
//              next publication, and a reader takes the child once its copy of them carries the
//              node's stamp (then caches it)
//   statistics one word per edge and process (plain region words, packed visits | wins), each
//              process's words a stripe of their own: a stripe is written only by its
//              process's threads with the CPU's atomics, and read by everyone; selection sums an
//              edge's words, its own current, the others' as of its last acquire
//
// Each process publishes its words and learns the others' every `sync_every` rollouts (a
// releasing and acquiring fetch_add on a shared word): write notices and leases keep the copies
// fresh in between, and MCTS only needs them fresh enough. Virtual loss lives in the process's
// own words. The region's blocks are large (SearchConfig::region_block): a publication then
// costs a few faults, twins and diffs for all the words a process wrote since the last one.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/coherence/space.hpp"
#include "loom/mcts_shared_tree/local_tree.hpp"
#include "loom/objects/context.hpp"

namespace loom::mcts {

template <typename G>
class CachedSearch final : public Search<G> {
  using State = typename G::State;
  static constexpr uint64_t kTagShift = 40;  // child word: epoch << 40 | (node offset + 1)
  static constexpr uint64_t kClaim = 4096;   // edge indices a process takes at a time
  struct NodeHead {
    uint32_t edges;
    uint32_t base;  // this node's first edge index
    uint64_t tag;   // stamp(epoch, offset): a copy of the arena from before the node says otherwise
  };

 public:
  // Collective. `edge_capacity` bounds the edges of all nodes of one search (the tree stops
  // growing there; rollouts go on).
  CachedSearch(const G& g, SearchConfig cfg, objects::Context& ctx, size_t edge_capacity = size_t{1} << 20)
      : Search<G>(g),
        g_(g),
        cfg_(cfg),
        ctx_(ctx),
        sp_(ctx.space()),
        cap_(edge_capacity),
        np_(static_cast<size_t>(ctx.size())),
        pool_(ctx.runtime().threads_per_process(),
              [&rt = ctx.runtime()](int t, std::function<void()> body) { return rt.spawn_at(t, "mcts-worker", std::move(body)); }) {
    const int np = ctx.size();
    const size_t arena = std::max<size_t>(size_t{8} << 20, edge_capacity * 8 / static_cast<size_t>(np));
    region::RegionOptions o;
    o.block_size = cfg.region_block;
    o.size = (static_cast<size_t>(np) + 1) * edge_capacity * 8 + static_cast<size_t>(np) * arena + (size_t{4} << 20);
    o.local_bytes = arena;
    r_ = &sp_.create_region(o);
    children_ = sp_.new_atomic_words(*r_, edge_capacity);
    control_ = sp_.new_atomic_words(*r_, 8);  // [0] edge counter, [1] rollouts started, [2] sync epoch
    stats_ = r_->new_array<uint64_t>(edge_capacity * static_cast<size_t>(np));
    arena_ = static_cast<uint8_t*>(r_->allocate_local(arena - 4096, 64));
    arena_bytes_ = arena - 4096;
    in_flight_ = std::make_unique<std::atomic<uint32_t>[]>(edge_capacity);
    known_ = std::make_unique<std::atomic<uint64_t>[]>(edge_capacity);
    ctx.process_barrier();
  }
  ~CachedSearch() override {
    ctx_.process_barrier();
    sp_.destroy_region(*r_);
  }

  // Collective; every worker thread of every process runs rollouts.
  SearchResult search(const State& position, Budget budget) override {
    const auto t0 = std::chrono::steady_clock::now();
    const coherence::Stats before = sp_.stats();
    start(position);
    std::vector<RolloutCounters> rc(static_cast<size_t>(ctx_.runtime().threads_per_process()));
    const auto deadline = t0 + std::chrono::duration<double>(budget.seconds > 0 ? budget.seconds : 1e9);
    auto work = [&](int t) {
      Rng rng(cfg_.seed * 7919 + static_cast<uint64_t>(ctx_.rank() * 64 + t) + 1);
      RolloutCounters& mine = rc[static_cast<size_t>(t)];
      ProgressClock clock(t == 0 && this->progress_);
      for (uint64_t done = 0, quota = 0;; ++done) {
        if (done == quota) {  // a batch of the job's budget, and a publication of this process's words
          quota += sync_and_claim(budget, mine);
          if (done == quota) break;
          if (clock.due()) this->progress_(Progress{clock.seconds(), mine.rollouts * np_ * rc.size(), mine.max_depth, root_edges()});
        }
        if ((done & 15) == 0 && budget.seconds > 0 && std::chrono::steady_clock::now() >= deadline) break;
        rollout(rng, mine);
      }
      ctx_.barrier();
    };
    pool_.run(work);
    ++cfg_.seed;
    RolloutCounters total;
    for (const auto& c : rc) total.add(c);
    const coherence::Stats after = sp_.stats();
    total.misses = after.read_misses - before.read_misses;
    total.invalidations = after.invalidations - before.invalidations;
    total.messages = total.remote_calls;
    const RolloutCounters all = all_counters(total);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate_ = seconds > 0 ? static_cast<double>(all.rollouts) / seconds : 0;
    return summarize(root_edges(), all, seconds);
  }

 private:
  // Edge e's word in process p's stripe.
  uint64_t& word_of(uint32_t e, int p) { return stats_[static_cast<size_t>(p) * cap_ + e]; }
  // A child word's node offset if it belongs to this search, else 0.
  uint64_t child_of(uint64_t w) const { return (w >> kTagShift) == epoch_ ? (w & ((uint64_t{1} << kTagShift) - 1)) - 1 : 0; }
  coherence::AtomicRef control(int i) { return sp_.atomic_ref(&control_[i]); }
  const uint8_t* node_at(uint64_t off) const { return r_->base() + off; }
  static const uint16_t* moves(const uint8_t* node) { return reinterpret_cast<const uint16_t*>(node + sizeof(NodeHead)); }
  uint64_t stamp(uint64_t off) const {
    uint64_t h = (static_cast<uint64_t>(epoch_) << 40) ^ off ^ 0x6a09e667f3bcc909ULL;
    h = (h ^ (h >> 31)) * 0x7fb5d329728ea185ULL;
    return h ^ (h >> 27);
  }
  // An acquiring load of the tag: it pairs with make_node's releasing store when another
  // thread of this process made the node, so the node's other bytes are read after they were
  // written (another process's node reaches this process's copy by an acquire already).
  bool stamped(uint64_t off) const {
    auto* tag = reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(node_at(off)) + offsetof(NodeHead, tag));
    return std::atomic_ref<uint64_t>(*tag).load(std::memory_order_acquire) == stamp(off);
  }

  // A new search: each process zeroes its words where the last one wrote, the edge counter and
  // the budget restart, the epoch moves on (children words of the last search read as none),
  // and rank 0 makes the root.
  void start(const State& position) {
    ctx_.process_barrier();
    // Every edge index the last search handed out, whoever made its node, has an entry here.
    used_ = std::min<uint64_t>(cap_, control(0).load(coherence::Order::Relaxed));
    std::fill_n(&word_of(0, ctx_.rank()), used_, uint64_t{0});
    ++epoch_;
    arena_used_ = 0;
    next_edge_ = limit_edge_ = 0;
    if (ctx_.rank() == 0) {
      control(0).store(0, coherence::Order::Relaxed);
      control(1).store(0, coherence::Order::Relaxed);
    }
    root_state_ = position;
    uint64_t root = ctx_.rank() == 0 ? make_node(position) : 0;
    root_ = ctx_.runtime().bootstrap().allgather_value(root)[0];
    publish_and_acquire();  // the root's bytes and the zeroed words
  }

  // One thread per process: every process's writes so far, published and acquired by all (a
  // releasing operation on a shared word, everyone, then an acquiring one).
  void publish_and_acquire() {
    control(2).fetch_add(1, coherence::Order::Release);
    ctx_.process_barrier();
    control(2).load(coherence::Order::Acquire);
  }

  // The node for state s in this process's arena; its edges from the job's edge counter.
  // 0 when the arena or the edges are used up (the tree stops growing).
  uint64_t make_node(const State& s) {
    uint16_t legal[1024];
    const int n = g_.winner(s) >= 0 ? 0 : g_.legal_moves(s, legal);
    std::lock_guard<std::mutex> g(mu_);
    const size_t bytes = (sizeof(NodeHead) + static_cast<size_t>(n) * 2 + 7) & ~size_t{7};
    // A node lies inside one block: a reader's one fetch of the block that holds the stamp
    // brings the moves with it (a node across two blocks could meet a stale copy of the
    // second, which no acquire had refreshed: garbage moves).
    const size_t bs = r_->block_size();
    size_t at = static_cast<size_t>(arena_ - r_->base()) + arena_used_;
    if (at / bs != (at + bytes - 1) / bs) at = (at / bs + 1) * bs;
    const size_t used = at - static_cast<size_t>(arena_ - r_->base()) + bytes;
    if (used > arena_bytes_) return 0;
    if (next_edge_ + static_cast<uint64_t>(n) > limit_edge_) {
      const uint64_t first = control(0).fetch_add(kClaim, coherence::Order::Relaxed);
      if (first + kClaim > cap_ || static_cast<uint64_t>(n) > kClaim) return 0;
      next_edge_ = first, limit_edge_ = first + kClaim;
    }
    uint8_t* p = sp_.writing(r_->base() + at, bytes);
    const uint64_t off = at;
    const NodeHead h{static_cast<uint32_t>(n), static_cast<uint32_t>(next_edge_), stamp(off)};
    // The moves before the stamp (a releasing store, last): another thread of this process may
    // publish the block between the stores, and a version that shows the stamp must hold the
    // moves.
    std::memcpy(p + sizeof h, legal, static_cast<size_t>(n) * 2);
    std::memcpy(p, &h, offsetof(NodeHead, tag));
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p + offsetof(NodeHead, tag))).store(h.tag, std::memory_order_release);
    next_edge_ += static_cast<uint64_t>(n);
    arena_used_ = used;
    return off;
  }

  // Edge e's statistics over every process's stripe (packed words add: no edge sees 2^32
  // playouts).
  EdgeStats summed(uint32_t e) const {
    uint64_t sum = 0;
    for (size_t p = 0; p < np_; ++p) sum += std::atomic_ref<uint64_t>(stats_[p * cap_ + e]).load(std::memory_order_relaxed);
    return EdgeStats::of(sum);
  }

  void rollout(Rng& rng, RolloutCounters& rc) {
    struct Step {
      uint32_t edge;
      int mover;
    };
    Step path[512];
    int depth = 0;
    State s = root_state_;
    const uint32_t k = cfg_.playouts, vl = cfg_.virtual_loss * k;
    const int me = ctx_.rank();
    for (uint64_t off = root_; off != 0 && depth < 512;) {
      NodeHead h;
      std::memcpy(&h, node_at(off), sizeof h);
      const int i = h.edges == 0 ? -1 : select_edge(static_cast<int>(h.edges), [&](int e) { return summed(h.base + static_cast<uint32_t>(e)); },
                                                   cfg_.exploration, rng);
      if (i < 0) break;
      const uint32_t e = h.base + static_cast<uint32_t>(i);
      std::atomic_ref<uint64_t>(word_of(e, me)).fetch_add(EdgeStats::word(vl, 0), std::memory_order_relaxed);
      if (in_flight_[e].fetch_add(1, std::memory_order_relaxed) != 0) ++rc.vl_collisions;
      path[depth++] = Step{e, g_.to_move(s)};
      g_.play(s, moves(node_at(off))[i]);
      off = child(e, s, summed(e).visits >= cfg_.expand_at * k + vl);
    }
    const int over = g_.winner(s);
    const uint32_t black = over >= 0 ? (over == 0 ? k : 0) : playouts_won(g_, s, 0, k, rng);
    for (int d = 0; d < depth; ++d) {
      const uint32_t wins = path[d].mover == 0 ? black : k - black;
      std::atomic_ref<uint64_t>(word_of(path[d].edge, me)).fetch_add((static_cast<uint64_t>(static_cast<int64_t>(k) - static_cast<int64_t>(vl)) << 32) + wins,
                                                             std::memory_order_relaxed);
      in_flight_[path[d].edge].fetch_sub(1, std::memory_order_relaxed);
    }
    ++rc.rollouts;
    rc.playouts += over >= 0 ? 0 : k;
    rc.depth_sum += static_cast<uint64_t>(depth);
    rc.max_depth = std::max<uint64_t>(rc.max_depth, static_cast<uint64_t>(depth));
  }

  // Edge e's child node, or 0 (evaluate here): from what this process learned before (known_),
  // else the edge's word; made now when `expand` says so.
  //
  // An edge whose playouts (as this process sees them) are below the expansion threshold is
  // not looked up: its child may exist (made by a process that saw more), and the rollout
  // evaluates here until this process's view passes the threshold too.
  uint64_t child(uint32_t e, const State& s, bool expand) {
    // known_ is stored with release after the node was seen stamped or made: the node's bytes
    // are read after it.
    if (const uint64_t c = child_of(known_[e].load(std::memory_order_acquire)); c != 0) return c;
    if (!expand) return 0;
    coherence::AtomicRef word = sp_.atomic_ref(&children_[e]);
    const uint64_t w = word.load(coherence::Order::Relaxed);
    if (const uint64_t c = child_of(w); c != 0) {
      // The maker publishes the node's bytes at its next synchronization: until this process's
      // copy of them carries the node's stamp (another search's bytes, or none, do not), the
      // child is not here yet and the rollout evaluates where it is. The bytes never change
      // after, so one good look is enough.
      if (!stamped(c)) return 0;
      known_[e].store(w, std::memory_order_release);
      return c;
    }
    const uint64_t made = make_node(s);
    if (made == 0) return 0;
    // Another process's child (our CAS lost) is not remembered: its stamp is checked at the
    // next visit (a node read without it came from a copy of the last search's arena).
    const uint64_t mine = (static_cast<uint64_t>(epoch_) << kTagShift) | (made + 1);
    if (word.compare_swap(w, mine, coherence::Order::Relaxed) == w) known_[e].store(mine, std::memory_order_release);
    return 0;  // evaluate from the new leaf this time
  }

  // Claims the next batch of the job's rollouts after publishing this process's words and
  // acquiring the others' (one releasing, acquiring fetch_add). A batch is `sync_every`
  // rollouts, less for a short search: a sixteenth of every worker's share of the rollouts the
  // budget stands for, so that the processes see each other's statistics during it (at 20 ms a
  // move, one batch per search won a quarter of its games against one local thread).
  uint64_t sync_and_claim(Budget b, RolloutCounters& rc) {
    control(2).fetch_add(1, coherence::Order::AcqRel);
    ++rc.remote_calls;
    const uint64_t workers = np_ * static_cast<uint64_t>(ctx_.runtime().threads_per_process());
    const uint64_t expected = expected_rollouts(b, rate_);
    const uint64_t batch = expected == 0 ? cfg_.sync_every : std::clamp<uint64_t>(expected / (16 * workers), 1, cfg_.sync_every);
    if (b.rollouts == 0) return batch;
    const uint64_t first = control(1).fetch_add(batch, coherence::Order::Relaxed);
    return first >= b.rollouts ? 0 : std::min<uint64_t>(batch, b.rollouts - first);
  }

  std::vector<RootEdge> root_edges() {
    std::vector<RootEdge> out;
    NodeHead h;
    std::memcpy(&h, node_at(root_), sizeof h);
    for (uint32_t i = 0; i < h.edges; ++i) {
      const EdgeStats e = summed(h.base + i);
      out.push_back(RootEdge{moves(node_at(root_))[i], e.visits, e.wins});
    }
    return out;
  }

  // Every process's counters summed (rank 0 reports them).
  RolloutCounters all_counters(const RolloutCounters& mine) {
    RolloutCounters total;
    for (const RolloutCounters& c : ctx_.runtime().bootstrap().allgather_value(mine)) total.add(c);
    return total;
  }

  const G& g_;
  SearchConfig cfg_;
  objects::Context& ctx_;
  coherence::Space& sp_;
  size_t cap_;
  size_t np_;  // processes
  WorkerPool pool_;  // the runtime's threads 1.. of this process
  double rate_ = 0;  // the last search's rollouts per second (the whole job's)
  region::Region* r_ = nullptr;
  uint64_t* children_ = nullptr;
  uint64_t* control_ = nullptr;
  uint64_t* stats_ = nullptr;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  // This process's (its threads share them under mu_ where they change during a search).
  std::mutex mu_;
  size_t arena_used_ = 0;
  uint64_t next_edge_ = 0, limit_edge_ = 0, used_ = 0;  // used_: the last search's edges, all processes'
  uint32_t epoch_ = 0;
  std::unique_ptr<std::atomic<uint32_t>[]> in_flight_;  // this process's rollouts below each edge
  std::unique_ptr<std::atomic<uint64_t>[]> known_;      // children words this process has seen stamped (tagged: this search's only)
  State root_state_{};
  uint64_t root_ = 0;
};

}  // namespace loom::mcts
