#pragma once
// The `cached-shared` tree policy (docs/mcts.md): the tree is an objects::CachedNodes, a Cached
// object in a shared region, and every worker of every process descends all of it on its
// process's cached copies.
//
//   nodes      CachedNodes nodes, written once by the process that made them; the payload is
//              the node's moves, one per edge
//   children   the edges' links (region atomic words, set by CAS); a reader takes a child once
//              its copy of the node's bytes is there, and remembers it
//   statistics the edges' counters, one word per edge and process (packed visits | wins);
//              selection sums an edge's words, this process's current, the others' as of its
//              last acquire
//
// Each process publishes its words and learns the others' every `sync_every` rollouts
// (CachedNodes::sync): a node's sums of the others' words are taken at its first visit after
// each synchronization (CachedNodes::refresh) and kept until the next, and MCTS only needs them
// fresh enough. Virtual loss lives in the process's own words. The region's blocks
// are large (SearchConfig::region_block): a publication then costs a few faults, twins and diffs
// for all the words a process wrote since the last one.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "loom/mcts_shared_tree/local_tree.hpp"
#include "loom/objects/cached_nodes.hpp"
#include "loom/objects/context.hpp"

namespace loom::mcts {

template <typename G>
class CachedSearch final : public Search<G> {
  using State = typename G::State;
  using Node = objects::CachedNodes::Node;
  static constexpr size_t kStarted = 0;  // the nodes' program word: rollouts started (a rollout budget)

 public:
  // Collective. `edge_capacity` bounds the edges of all nodes of one search (the tree stops
  // growing there; rollouts go on).
  CachedSearch(const G& g, SearchConfig cfg, objects::Context& ctx, size_t edge_capacity = size_t{1} << 20)
      : Search<G>(g),
        g_(g),
        cfg_(cfg),
        ctx_(ctx),
        np_(static_cast<size_t>(ctx.size())),
        nodes_(ctx, objects::CachedNodes::Options{edge_capacity, std::max<size_t>(size_t{8} << 20, edge_capacity * 8 / np_),
                                                  cfg.region_block, 1}),
        pool_(ctx.runtime().threads_per_process(),
              [&rt = ctx.runtime()](int t, std::function<void()> body) { return rt.spawn_at(t, "mcts-worker", std::move(body)); }),
        in_flight_(std::make_unique<std::atomic<uint32_t>[]>(edge_capacity)) {}

  // Collective; every worker thread of every process runs rollouts.
  SearchResult search(const State& position, Budget budget) override {
    const auto t0 = std::chrono::steady_clock::now();
    const coherence::Stats before = ctx_.space().stats();
    const uint64_t summed_before = nodes_.refreshed_edges();
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
    const coherence::Stats after = ctx_.space().stats();
    total.misses = after.read_misses - before.read_misses;
    total.invalidations = after.invalidations - before.invalidations;
    total.bytes_fetched = after.bytes_fetched - before.bytes_fetched;
    total.released_blocks = after.released_blocks - before.released_blocks;
    total.worker_cpu_ns = pool_.last_run_cpu_ns();
    total.edges_summed = nodes_.refreshed_edges() - summed_before;
    total.messages = total.remote_calls;
    const RolloutCounters all = all_counters(total);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate_ = seconds > 0 ? static_cast<double>(all.rollouts) / seconds : 0;
    return summarize(root_edges(), all, seconds);
  }

 private:
  static const uint16_t* moves(const objects::CachedNodes& nodes, Node n) { return reinterpret_cast<const uint16_t*>(nodes.payload(n)); }

  // A new search: the nodes' next generation (the last search's children read as none, the
  // statistics are zero), the budget restarts, and rank 0 makes the root.
  void start(const State& position) {
    nodes_.reset();
    if (ctx_.rank() == 0) nodes_.word(kStarted).store(0, coherence::Order::Relaxed);
    root_state_ = position;
    const Node root = ctx_.rank() == 0 ? make_node(position) : 0;
    root_ = ctx_.runtime().bootstrap().allgather_value(root)[0];
    nodes_.sync_all();  // the root's bytes and the budget's word
  }

  // The node for state s, its legal moves as payload; 0 when the tree cannot grow.
  Node make_node(const State& s) {
    uint16_t legal[1024];
    const int n = g_.winner(s) >= 0 ? 0 : g_.legal_moves(s, legal);
    return nodes_.make(static_cast<uint32_t>(n), static_cast<size_t>(n) * 2,
                       [&](std::byte* p) { std::memcpy(p, legal, static_cast<size_t>(n) * 2); });
  }

  // Edge e's statistics over every process's stripe, the others' as of its node's last refresh
  // (packed words add: no edge sees 2^32 playouts).
  EdgeStats summed(uint32_t e) const { return EdgeStats::of(nodes_.summed(e)); }

  void rollout(Rng& rng, RolloutCounters& rc) {
    struct Step {
      uint32_t edge;
      int mover;
    };
    Step path[512];
    int depth = 0;
    State s = root_state_;
    const uint32_t k = cfg_.playouts, vl = cfg_.virtual_loss * k;
    for (Node n = root_; n != 0 && depth < 512;) {
      const objects::CachedNodes::Head h = nodes_.head(n);
      nodes_.refresh(h);
      const int i = h.edges == 0 ? -1 : select_edge(static_cast<int>(h.edges), [&](int e) { return summed(h.first + static_cast<uint32_t>(e)); },
                                                   cfg_.exploration, rng);
      if (i < 0) break;
      rc.edges_read += h.edges;
      const uint32_t e = h.first + static_cast<uint32_t>(i);
      nodes_.add(e, EdgeStats::word(vl, 0));
      if (in_flight_[e].fetch_add(1, std::memory_order_relaxed) != 0) ++rc.vl_collisions;
      path[depth++] = Step{e, g_.to_move(s)};
      g_.play(s, moves(nodes_, n)[i]);
      n = child(e, s, summed(e).visits >= cfg_.expand_at * k + vl);
    }
    const int over = g_.winner(s);
    const uint32_t black = leaf_black_wins(g_, s, over, k, rng);
    for (int d = 0; d < depth; ++d) {
      const uint32_t wins = path[d].mover == 0 ? black : k - black;
      nodes_.add(path[d].edge, (static_cast<uint64_t>(static_cast<int64_t>(k) - static_cast<int64_t>(vl)) << 32) + wins);
      in_flight_[path[d].edge].fetch_sub(1, std::memory_order_relaxed);
    }
    ++rc.rollouts;
    rc.playouts += over >= 0 ? 0 : k;
    rc.depth_sum += static_cast<uint64_t>(depth);
    rc.max_depth = std::max<uint64_t>(rc.max_depth, static_cast<uint64_t>(depth));
  }

  // Edge e's child node, or 0 (evaluate here): the one this process has seen before, else the
  // edge's link; made now when `expand` says so.
  //
  // An edge whose playouts (as this process sees them) are below the expansion threshold is
  // not looked up: its child may exist (made by a process that saw more), and the rollout
  // evaluates here until this process's view passes the threshold too. A child whose bytes have
  // not reached this process (its maker publishes them at its next synchronization) is not here
  // yet either.
  Node child(uint32_t e, const State& s, bool expand) {
    if (const Node c = nodes_.known(e); c != 0) return c;
    if (!expand) return 0;
    if (const objects::CachedNodes::Link l = nodes_.look(e); l.taken) return l.node;
    const Node made = make_node(s);
    if (made != 0) nodes_.link(e, made);  // lost to another process's child: that one is used later
    return 0;  // evaluate from the new leaf this time
  }

  // Claims the next batch of the job's rollouts after publishing this process's words and
  // acquiring the others' (one releasing, acquiring fetch_add). A batch is `sync_every`
  // rollouts, less for a short search: a sixteenth of every worker's share of the rollouts the
  // budget stands for, so that the processes see each other's statistics during it
  // (bench/README.md, "Measurements behind constants in the code").
  uint64_t sync_and_claim(Budget b, RolloutCounters& rc) {
    nodes_.sync();
    ++rc.remote_calls;
    const uint64_t workers = np_ * static_cast<uint64_t>(ctx_.runtime().threads_per_process());
    const uint64_t expected = expected_rollouts(b, rate_);
    const uint64_t batch = expected == 0 ? cfg_.sync_every : std::clamp<uint64_t>(expected / (16 * workers), 1, cfg_.sync_every);
    if (b.rollouts == 0) return batch;
    const uint64_t first = nodes_.word(kStarted).fetch_add(batch, coherence::Order::Relaxed);
    return first >= b.rollouts ? 0 : std::min<uint64_t>(batch, b.rollouts - first);
  }

  std::vector<RootEdge> root_edges() {
    std::vector<RootEdge> out;
    const objects::CachedNodes::Head h = nodes_.head(root_);
    nodes_.refresh(h);
    for (uint32_t i = 0; i < h.edges; ++i) {
      const EdgeStats e = summed(h.first + i);
      out.push_back(RootEdge{moves(nodes_, root_)[i], e.visits, e.wins});
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
  size_t np_;  // processes
  objects::CachedNodes nodes_;
  WorkerPool pool_;  // the runtime's threads 1.. of this process
  double rate_ = 0;  // the last search's rollouts per second (the whole job's)
  std::unique_ptr<std::atomic<uint32_t>[]> in_flight_;  // this process's rollouts below each edge
  State root_state_{};
  Node root_ = 0;
};

}  // namespace loom::mcts
