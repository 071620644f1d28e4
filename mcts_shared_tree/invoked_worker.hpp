#pragma once
// The owner-invoked tree's per-worker state (invoked_tree.hpp): its nodes and their memory, its
// Aggregator, its counters, the scratch vectors of the rollout steps it runs, and under
// random-at-expansion its deferred selections and simulation queue. It knows nothing of the
// game (positions travel as bytes here).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/lockfree/queue.hpp>

#include "loom/dsm/common/error.hpp"
#include "loom/invoke/aggregator.hpp"
#include "loom/mcts_shared_tree/local_tree.hpp"
#include "loom/mcts_shared_tree/rollout_wire.hpp"

namespace loom::mcts::invoked {

// A thread's simulation queue: leaves (rollout messages) pushed by any thread of its process,
// taken by the thread alone. Boost.Lockfree's queue of owned pointers: TBB's concurrent_queue
// recycles its pages through TBB's allocator, which the thread sanitizer cannot see into (it
// reported the reuse of a page as a race).
class SimulationQueue {
 public:
  SimulationQueue() : q_(64) {}
  ~SimulationQueue() { clear(); }
  SimulationQueue(const SimulationQueue&) = delete;
  SimulationQueue& operator=(const SimulationQueue&) = delete;
  void push(std::vector<std::byte>&& msg) {
    auto* m = new std::vector<std::byte>(std::move(msg));
    if (q_.push(m)) return;
    delete m;
    fail("mcts: a simulation queue could not take a leaf (no memory for its node)");
  }
  bool try_pop(std::vector<std::byte>& out) {
    std::vector<std::byte>* m = nullptr;
    if (!q_.pop(m)) return false;
    out = std::move(*m);
    delete m;
    return true;
  }
  // Not concurrent with push (between searches).
  void clear() {
    std::vector<std::byte>* m = nullptr;
    while (q_.pop(m)) delete m;
  }

 private:
  boost::lockfree::queue<std::vector<std::byte>*> q_;
};

// The vectors a rollout's step on a worker uses (its path, its results, the message it
// sends), kept from step to step.
struct Scratch {
  std::vector<Step> path;
  std::vector<std::pair<uint32_t, Result>> results;
  std::vector<Result> batch, received;
  std::vector<std::byte> msg;
  AmafCounts amaf, received_amaf;  // RAVE: this step's leaf's counts, and a results call's
};
// A worker's state lasts from search to search (its node memory, its Aggregator): a search
// starts by forgetting the last one's nodes, not by building the worker anew.
struct Worker {
  void reset(uint64_t seed, int global_id) {
    gid = global_id;
    nodes.clear();
    arena.rewind();
    rng = Rng(seed);
    rc = RolloutCounters{};
    done = false;
    created = 0;
    deferred.clear();
    simulations.clear();
  }
  std::unordered_map<uint64_t, uint8_t*> nodes;
  Arena arena;
  Rng rng{1};
  std::unique_ptr<invoke::Aggregator> agg;
  RolloutCounters rc;
  int gid = 0;  // this worker's global id (the owner named in ids and paths)
  std::vector<std::unique_ptr<Scratch>> scratch;  // by nesting depth (see StepScratch)
  size_t level = 0;
  bool done = false;  // this search's end reached this worker (its own thread's call)
  // random-at-expansion: the nodes this worker made so far; the rollouts waiting at a
  // (node, edge) for the child being created; the leaves this thread is to evaluate (pushed
  // by any thread of this process).
  uint64_t created = 0;
  std::map<std::pair<uint64_t, uint16_t>, std::vector<std::vector<std::byte>>> deferred;
  SimulationQueue simulations;
};
// A step's scratch while it runs. Steps nest: outside a call (the root owner's starts), a
// call that finds its ring full runs this thread's incoming calls until there is room
// (invoke's Messenger), and those are steps too; each level has its own scratch.
class StepScratch {
 public:
  explicit StepScratch(Worker& w) : w_(w) {
    if (w.level == w.scratch.size()) w.scratch.push_back(std::make_unique<Scratch>());
    s_ = w.scratch[w.level++].get();
  }
  ~StepScratch() { --w_.level; }
  StepScratch(const StepScratch&) = delete;
  StepScratch& operator=(const StepScratch&) = delete;
  Scratch& operator*() const { return *s_; }

 private:
  Worker& w_;
  Scratch* s_;
};

}  // namespace loom::mcts::invoked
