#pragma once
// The `local` tree policy (docs/mcts.md): one process, a tree in its own memory that its threads
// share — edge statistics and virtual loss by CPU atomics, children by CAS. Also the tree each
// process of the `root` policy grows alone.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/mcts_shared_tree/rave.hpp"
#include "loom/mcts_shared_tree/search.hpp"
#include "loom/mcts_shared_tree/worker_pool.hpp"

namespace loom::mcts {

// Memory for nodes, one arena per worker (no lock). rewind() makes its chunks free for the next
// search's nodes without returning them, so a search allocates (and faults in) memory only
// beyond what the searches before it used. Chunks are not zeroed; NodeLayout::make zeroes each
// node.
class Arena {
 public:
  uint8_t* allocate(size_t bytes) {
    bytes = (bytes + 15) & ~size_t{15};
    while (current_ < chunks_.size() && used_ + bytes > chunks_[current_].size) ++current_, used_ = 0;
    if (current_ == chunks_.size()) {
      const size_t size = std::max(kChunk, bytes);
      chunks_.push_back(Chunk{std::make_unique_for_overwrite<uint8_t[]>(size), size});
    }
    uint8_t* p = chunks_[current_].bytes.get() + used_;
    used_ += bytes;
    return p;
  }
  // Every node allocated so far is dead; their memory serves the next allocations.
  void rewind() { current_ = 0, used_ = 0; }
  size_t bytes() const {
    size_t n = 0;
    for (const Chunk& c : chunks_) n += c.size;
    return n;
  }

 private:
  static constexpr size_t kChunk = size_t{4} << 20;
  struct Chunk {
    std::unique_ptr<uint8_t[]> bytes;
    size_t size;
  };
  std::vector<Chunk> chunks_;
  size_t current_ = 0, used_ = 0;
};

template <typename G>
class LocalTree {
  using State = typename G::State;

 public:
  LocalTree(const G& g, SearchConfig cfg) : g_(g), cfg_(cfg) {
    if (cfg.rave != 0 && !supports_rave<G>()) fail("mcts: --rave needs a game whose playouts report their ending (rave.hpp)");
  }

  void reset(const State& root, int workers) {
    arenas_.resize(static_cast<size_t>(std::max(workers, 1)));
    amaf_.resize(arenas_.size());
    for (auto& a : arenas_) {
      if (!a) a = std::make_unique<Arena>();
      a->rewind();
    }
    root_state_ = root;
    root_ = make_node(*arenas_[0], root);
  }

  // One rollout by worker `w`: selection with virtual loss down to an edge without a node
  // (creating it once the edge has seen expand_at rollouts), K playouts, backpropagation.
  void rollout(int w, Rng& rng, RolloutCounters& rc) {
    struct Step {
      uint8_t* node;
      int edge, mover;
    };
    Step path[G_max_depth];
    int depth = 0;
    State s = root_state_;
    const uint32_t k = cfg_.playouts, vl = cfg_.virtual_loss * k;
    // A node of a finished game has no edges: selection stops there.
    for (uint8_t* node = root_; node != nullptr && depth < G_max_depth;) {
      const int n = static_cast<int>(NodeLayout::edges(node));
      uint64_t* st = NodeLayout::stats(node);
      auto stats_of = [&](int e) { return EdgeStats::of(std::atomic_ref<uint64_t>(st[e]).load(std::memory_order_relaxed)); };
      uint64_t* am = NodeLayout::amaf(node);
      auto amaf_of = [&](int e) { return EdgeStats::of(std::atomic_ref<uint64_t>(am[e]).load(std::memory_order_relaxed)); };
      const int i = cfg_.rave != 0 ? select_edge_rave(n, stats_of, amaf_of, cfg_.exploration, cfg_.rave, rng)
                                   : select_edge(n, stats_of, cfg_.exploration, rng);
      if (i < 0) break;
      rc.edges_read += static_cast<uint64_t>(n);
      if (std::atomic_ref<uint32_t>(NodeLayout::in_flight(node)[i]).fetch_add(1, std::memory_order_relaxed) != 0) ++rc.vl_collisions;
      const uint64_t before = std::atomic_ref<uint64_t>(st[i]).fetch_add(EdgeStats::word(vl, 0), std::memory_order_relaxed);
      path[depth++] = Step{node, i, g_.to_move(s)};
      g_.play(s, NodeLayout::moves(node)[i]);
      node = child_of(node, i, EdgeStats::of(before).visits, s, w);
    }
    const int over = g_.winner(s);
    const uint32_t black = evaluate(s, over, w, rng);
    for (int d = 0; d < depth; ++d) {
      // AMAF words take relaxed load-and-store: another worker's update at the same time may
      // be lost (a bias the selection tolerates, at no locked instruction per edge).
      if (cfg_.rave != 0)
        add_amaf(path[d].node, path[d].mover, amaf_[static_cast<size_t>(w)], [](uint64_t& word, uint64_t delta) {
          std::atomic_ref<uint64_t> a(word);
          a.store(a.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
        });
      const uint32_t wins = path[d].mover == 0 ? black : k - black;
      const uint64_t delta = (static_cast<uint64_t>(static_cast<int64_t>(k) - static_cast<int64_t>(vl)) << 32) + wins;
      std::atomic_ref<uint64_t>(NodeLayout::stats(path[d].node)[path[d].edge]).fetch_add(delta, std::memory_order_relaxed);
      std::atomic_ref<uint32_t>(NodeLayout::in_flight(path[d].node)[path[d].edge]).fetch_sub(1, std::memory_order_relaxed);
    }
    ++rc.rollouts;
    rc.playouts += over >= 0 ? 0 : k;
    rc.depth_sum += static_cast<uint64_t>(depth);
    rc.max_depth = std::max<uint64_t>(rc.max_depth, static_cast<uint64_t>(depth));
  }

  std::vector<RootEdge> root_edges() const {
    std::vector<RootEdge> out;
    const int n = static_cast<int>(NodeLayout::edges(root_));
    for (int i = 0; i < n; ++i) {
      const EdgeStats e = EdgeStats::of(std::atomic_ref<uint64_t>(NodeLayout::stats(root_)[i]).load(std::memory_order_relaxed));
      out.push_back(RootEdge{NodeLayout::moves(root_)[i], e.visits, e.wins});
    }
    return out;
  }

 private:
  static constexpr int G_max_depth = 512;

  // Black's wins of K playouts from `s` (`over`: its winner, or -1), with AMAF counts into
  // worker w's under RAVE.
  uint32_t evaluate(const State& s, int over, int w, Rng& rng) {
    return evaluate_leaf(g_, s, over, cfg_.playouts, cfg_.rave, rng, amaf_[static_cast<size_t>(w)]);
  }

  uint8_t* make_node(Arena& a, const State& s) {
    uint16_t legal[1024];
    const int n = g_.winner(s) >= 0 ? 0 : g_.legal_moves(s, legal);
    uint8_t* node = a.allocate(NodeLayout::bytes(n));
    NodeLayout::make(node, n, legal);
    return node;
  }
  // Edge i's child node, made now if the edge has seen expand_at rollouts (the first to get
  // there wins the CAS; a loser's node is left in its arena); nullptr: evaluate here.
  uint8_t* child_of(uint8_t* node, int i, uint32_t visits_before, const State& s, int w) {
    std::atomic_ref<uint64_t> slot(NodeLayout::children(node)[i]);
    if (uint64_t c = slot.load(std::memory_order_acquire); c != 0) return reinterpret_cast<uint8_t*>(c);
    if (visits_before < cfg_.expand_at * cfg_.playouts) return nullptr;
    uint8_t* fresh = make_node(*arenas_[static_cast<size_t>(w)], s);
    uint64_t expected = 0;
    slot.compare_exchange_strong(expected, reinterpret_cast<uint64_t>(fresh), std::memory_order_acq_rel);
    return nullptr;  // evaluate from the new leaf this time
  }

  const G& g_;
  SearchConfig cfg_;
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::vector<AmafCounts> amaf_;  // per worker: its last leaf's
  State root_state_{};
  uint8_t* root_ = nullptr;
};

// Runs rollouts on the pool's workers until the budget is spent; worker 0 reports progress
// when `progress` is set.
template <typename G, typename Tree>
RolloutCounters run_workers(Tree& tree, WorkerPool& pool, Budget b, uint64_t seed, const ProgressFn& progress = {}) {
  std::atomic<uint64_t> started{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(b.seconds > 0 ? b.seconds : 1e9);
  std::vector<RolloutCounters> counters(static_cast<size_t>(pool.workers()));
  ProgressClock clock(static_cast<bool>(progress));
  pool.run([&](int w) {
    Rng rng(seed * 7919 + static_cast<uint64_t>(w) + 1);
    RolloutCounters& mine = counters[static_cast<size_t>(w)];
    for (uint64_t n = 0;; ++n) {
      if (started.fetch_add(1, std::memory_order_relaxed) >= b.rollouts && b.rollouts != 0) break;
      if ((n & 15) == 0) {
        if (b.seconds > 0 && std::chrono::steady_clock::now() >= deadline) break;
        if (w == 0 && clock.due()) progress(Progress{clock.seconds(), started.load(std::memory_order_relaxed), mine.max_depth, tree.root_edges()});
      }
      tree.rollout(w, rng, mine);
    }
  });
  RolloutCounters total;
  for (const auto& c : counters) total.add(c);
  total.worker_cpu_ns = pool.last_run_cpu_ns();
  return total;
}

// The search's answer from its root edges.
SearchResult summarize(std::vector<RootEdge> root, RolloutCounters rc, double seconds);

template <typename G>
class LocalSearch final : public Search<G> {
 public:
  LocalSearch(const G& g, SearchConfig cfg) : Search<G>(g), g_(g), cfg_(cfg), tree_(g, cfg), pool_(cfg.threads, WorkerPool::any_core()) {}
  SearchResult search(const typename G::State& position, Budget budget) override {
    const auto t0 = std::chrono::steady_clock::now();
    tree_.reset(position, cfg_.threads);
    const RolloutCounters rc = run_workers<G>(tree_, pool_, budget, cfg_.seed++, this->progress_);
    return summarize(tree_.root_edges(), rc, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

 private:
  const G& g_;
  SearchConfig cfg_;
  LocalTree<G> tree_;
  WorkerPool pool_;
};

}  // namespace loom::mcts
