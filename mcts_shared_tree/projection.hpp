#pragma once
// The tree policies' rollouts per second past this machine (docs/performance-at-scale.md, "MCTS
// past this machine"): what a rollout costs one worker thread under each policy, from the cost
// model's components (objects/projection.hpp's Placements) and what a rollout does, counted by a
// run. The model gives every worker thread a core (a loaded host is not in it), no collisions and
// no waiting for a descheduled owner.
//
//   root           one local rollout: the processes never talk during a search
//   owner-invoked  a local rollout's work spread over the workers, plus each call to another
//                  worker at both ends (the caller's aggregated send and the owner's handling),
//                  plus what a travelling rollout costs beyond its calls' components (its
//                  records, the owners' node lookups, the starter's bookkeeping: `extra_us`);
//                  a worker's `in_flight` rollouts travel together, so a call's latency counts
//                  only when they all wait
//   cached-shared  a local rollout, plus summing the other processes' statistic words of a
//                  node's edges at its first visit after each synchronization, and per rollout
//                  its share of block misses (a round trip and the block's bytes), releases of
//                  the blocks it wrote and acquires,
//                  plus what the shared tree's layout costs beyond a local tree's (`extra_us`)
//
// `extra_us` is what the components do not price: fitted to one run (the smallest scale of a
// sweep) and held at every other scale.
#include "loom/mcts_shared_tree/search.hpp"
#include "loom/objects/projection.hpp"

namespace loom::mcts {

// What a rollout does and what its local parts cost.
struct RolloutProfile {
  // Measured on one process (not a count):
  double rollout_us = 0;  // a rollout of one thread of one process alone (the local tree)
  double word_us = 0;     // reading one more process's statistic word of an edge (cached-shared's sum)
  double byte_us = 0;     // a block's byte read across the wire, beyond the READ's latency
  double extra_us = 0;    // the policy's cost a rollout beyond the local work and the priced counts (fit_extra_us)
  // Counted per rollout at the scale `at` (a run's bench_mcts rows):
  objects::Scale at;
  int threads = 1;            // worker threads a process
  double edges = 0;           // cached-shared: edges whose others' words were summed
  double calls = 0;           // owner-invoked: calls to another worker
  double misses = 0, bytes = 0;  // cached-shared: block fetches and their bytes
  double released = 0, syncs = 0;  // cached-shared: blocks released, synchronizations
  uint32_t in_flight = 64;    // owner-invoked: rollouts in flight per worker
};

// The counts at another scale: an owner-invoked path crosses to another worker at each step
// with probability 1 - 1/workers; a cached-shared process fetches the blocks the others wrote
// (in proportion to how many others there are), releases its own and sums the nodes it visits
// once a synchronization (as many at any scale).
RolloutProfile at_scale(const RolloutProfile& r, objects::Scale to);

// Microseconds of one worker thread per rollout under the policy, at the profile's scale.
double rollout_us(const objects::Placements& c, TreePolicy p, const RolloutProfile& r);
// The extra_us that makes the policy's rollout_us equal `measured_us` (a worker's time per
// rollout in a run at the profile's scale; 0 if the components already cost more).
double fit_extra_us(const objects::Placements& c, TreePolicy p, const RolloutProfile& r, double measured_us);
// The job's rollouts per second.
inline double rollouts_per_s(const RolloutProfile& r, double us) {
  return us > 0 ? r.at.processes() * r.threads * 1e6 / us : 0;
}

}  // namespace loom::mcts
