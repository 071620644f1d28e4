#pragma once
// Seed 001's Figure 6 on Loom (bench/README.md, "bench_objects"): queue push latency as every
// process computes 0-20 us between its pushes — one-sided, owner-invoked without and with a
// progress thread, and Auto (which policy it ends on).
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/objects/context.hpp"

namespace loom::bench {

struct Fig6Options {
  std::vector<int> compute_us{0, 1, 2, 5, 10, 20};
  int pushes = 1500;  // per process and setting
};

// Collective. `label` names the owner-invoked rows ("invoked", or "invoked-pt" when the
// Context's Invoker has a helper thread); `with_others` adds the one-sided and Auto rows.
void fig6_rows(objects::Context& ctx, const std::string& label, bool with_others, const Fig6Options& o, std::vector<Row>& rows);

}  // namespace loom::bench
