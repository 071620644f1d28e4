#pragma once
// Seed 001's contended queue (bench/README.md, "bench_objects"): every process pushes into one
// queue at rank 0 at once, one-sided, fully atomic and phasal, beside the cost model with the
// contended components (objects::predict_contended) and without them (predict, one at a time).
// Rows: variant `contended/onesided-<atomic|phasal>`, size = processes; metrics us (the mean
// over every process's pushes), model_us, model_alone_us.
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/cost_model.hpp"

namespace loom::bench {

// Collective; `c` the components measured in this run (everyone's copy of rank 0's).
void contended_rows(objects::Context& ctx, const objects::Components& c, int pushes, std::vector<Row>& rows);

}  // namespace loom::bench
