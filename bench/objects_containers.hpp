#pragma once
// bench_objects' container rows (bench/README.md, "bench_objects"): every container operation
// under every fixed policy and level, one at a time and in batches, beside the cost model's
// prediction from the components measured in the same run; the mixed workload under every
// policy and Auto; and how often the model picks the measured best.
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/cost_model.hpp"

namespace loom::bench {

struct ContainerOptions {
  int iters = 2000;  // operations per one-at-a-time row
  int rounds = 3;    // of every policy's rows, in turns
  size_t batch = 64;
  double mixed_seconds = 0.2;  // per policy
};

// Collective. Rows are filled on rank 0.
void container_rows(objects::Context& ctx, const ContainerOptions& o, std::vector<Row>& rows);
void mixed_rows(objects::Context& ctx, const ContainerOptions& o, std::vector<Row>& rows);
// From the one-at-a-time rows already in `rows`: the share of (operation, level) cells where
// the model's pick — the policy whose row has the lowest model_us — is the measured best or
// within 10% of it.
void model_pick_row(std::vector<Row>& rows);

}  // namespace loom::bench
