#pragma once
// Measuring the cost model's components on the fabric at hand (docs/objects.md, "Cost model"):
// what loom-calibrate writes, what bench_objects compares its rows against, and what an Auto
// object measures when no calibration file fits.
#include "loom/objects/context.hpp"
#include "loom/objects/cost_model.hpp"

namespace loom::objects {

// Collective. Rank 0 measures against rank 1 (itself when alone; the first rank across an
// emulated wire or a network if there is one) while the others run their calls; every process
// returns rank 0's figures. `iters` operations per component.
Components measure_components(Context& ctx, int iters);
// Collective: the rank rank 0 measures against by default — the first rank it reaches over another
// transport than its own memory's (across an emulated wire or a network), else rank 1 (itself
// when alone). The same on every rank.
int calibration_peer(Context& ctx);

// The same against `peer` (the same on every rank; rank 0 itself too): what an operation on a
// part at that rank costs, as the node sweep's model mixes them (objects/projection.hpp).
Components measure_components(Context& ctx, int iters, int peer);

// The fabric a calibration is for, the same on every rank of a job: the provider's name, with
// the transport between nodes when there is one and the name does not say it ("shm" and
// "shm+wire:ib-edr" on one host, "shm+verbs" across hosts). A calibration file is used only by
// jobs with the same label.
std::string fabric_label(Runtime& rt);

}  // namespace loom::objects
