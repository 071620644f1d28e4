#pragma once
// bench_objects' node sweep (seed 001's; docs/performance-at-scale.md): every process inserts
// fresh keys, then finds keys, spread over every process's part, one operation at a time, under
// each policy and Auto. Beside each figure: the projection's prediction for this job's nodes
// (objects/projection.hpp) from components measured in the same run against rank 0's own part,
// a part on its node and one across the wire; and the host's floor, the processes' CPU time per
// operation spread over this machine's cores. Then the projection from 2 to 64 nodes.
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/objects/context.hpp"

namespace loom::bench {

struct ScaleOptions {
  size_t ops = 3000;  // per process, phase and round
  int rounds = 3;     // policies take turns, each round in another order
};

// Collective. Rows are filled on rank 0.
void scale_rows(objects::Context& ctx, const ScaleOptions& o, std::vector<Row>& rows);

}  // namespace loom::bench
