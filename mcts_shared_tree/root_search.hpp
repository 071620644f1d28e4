#pragma once
// The `root` tree policy (root parallelization, the classic baseline; docs/mcts.md): every
// process grows its own tree with its threads, no communication during the search; at the end
// the root edges' statistics are summed over the processes, and the most visited move wins.
// Progress reports show rank 0's own tree.
#include <chrono>
#include <cstring>
#include <map>

#include "loom/dsm/runtime/runtime.hpp"
#include "loom/mcts_shared_tree/local_tree.hpp"

namespace loom::mcts {

template <typename G>
class RootSearch final : public Search<G> {
 public:
  RootSearch(const G& g, SearchConfig cfg, Runtime& rt) : Search<G>(g), g_(g), cfg_(cfg), rt_(rt), tree_(g, cfg), pool_(cfg.threads, WorkerPool::any_core()) {}

  // Collective: the rollout budget is split evenly among the processes.
  SearchResult search(const typename G::State& position, Budget budget) override {
    const auto t0 = std::chrono::steady_clock::now();
    tree_.reset(position, cfg_.threads);
    Budget mine = budget;
    if (budget.rollouts != 0) {
      const uint64_t np = static_cast<uint64_t>(rt_.size()), r = static_cast<uint64_t>(rt_.rank());
      mine.rollouts = budget.rollouts / np + (r < budget.rollouts % np ? 1 : 0);
    }
    // Every process's trees differ: their random numbers do. A process whose share of a rollout
    // budget is 0 runs none (a budget of 0 rollouts would mean "no limit").
    const uint64_t seed = cfg_.seed++ * 1000003 + static_cast<uint64_t>(rt_.rank());
    const bool idle = budget.rollouts != 0 && mine.rollouts == 0;
    const RolloutCounters rc = idle ? RolloutCounters{} : run_workers<G>(tree_, pool_, mine, seed, this->progress_);
    std::vector<RootEdge> edges = tree_.root_edges();
    std::map<uint16_t, RootEdge> sum;
    for (const auto& bytes : rt_.bootstrap().allgather(std::as_bytes(std::span<const RootEdge>(edges)))) {
      std::vector<RootEdge> theirs(bytes.size() / sizeof(RootEdge));
      if (!theirs.empty()) std::memcpy(theirs.data(), bytes.data(), bytes.size());
      for (const RootEdge& e : theirs) {
        RootEdge& s = sum.try_emplace(e.move, RootEdge{e.move, 0, 0}).first->second;
        s.visits += e.visits, s.wins += e.wins;
      }
    }
    RolloutCounters total;
    for (const RolloutCounters& c : rt_.bootstrap().allgather_value(rc)) total.add(c);
    std::vector<RootEdge> out;
    for (const auto& [m, e] : sum) out.push_back(e);
    return summarize(std::move(out), total, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

 private:
  const G& g_;
  SearchConfig cfg_;
  Runtime& rt_;
  LocalTree<G> tree_;
  WorkerPool pool_;
};

}  // namespace loom::mcts
