#pragma once
// bench_mcts --model: the tree policies' cost model (mcts_shared_tree/projection.hpp) beside the
// measured rows of the same run, and its projection to 64 nodes (docs/performance-at-scale.md,
// "MCTS past this machine").
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/mcts_shared_tree/projection.hpp"

namespace loom::bench {

// What the model needs that the rows do not hold, measured by rank 0. Collective.
struct ModelInputs {
  objects::JobLayout layout;
  objects::Placements c;
  double word_us = 0, byte_us = 0;
};
ModelInputs measure_model_inputs(objects::Context& ctx, size_t block_bytes);

struct ModelOptions {
  std::vector<mcts::TreePolicy> policies;
  int np = 1, threads = 1;
  uint32_t in_flight = 64;
  size_t board = 11;
  std::string extra_from;  // a CSV of another run whose policies' extra_us_fit the model uses ("": fit to this run)
};

// Rank 0: for each measured variant `<policy>-np<P>-t<T>` (before any wire suffix), rows
// model_rollouts_per_s, over_model (the measured rate over every position, rollouts_per_s_all,
// over the model's), over_model_host (the same over root's: the share of the model's figure a
// host with fewer cores than threads leaves, which root, with no waiting and no wire traffic,
// shows), model_us (a worker's microseconds a rollout) and cpu_over_model (model_us over the
// workers' measured CPU time a rollout; a worker waiting asleep is not in it) and extra_us_fit
// (projection.hpp's extra_us fitted to this run's host-adjusted rate); then, across a wire, rows mcts-model/<policy> at 2-64 nodes (size: the
// nodes).
void model_rows(const ModelInputs& in, const ModelOptions& o, std::vector<Row>& rows);

}  // namespace loom::bench
