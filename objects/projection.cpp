#include "loom/objects/projection.hpp"

#include <algorithm>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/fabric.hpp"
#include "loom/objects/calibrate.hpp"

namespace loom::objects {

const Components& deciding(const Placements& c, Scale s) { return s.nodes > 1 ? c.wire : s.ranks_per_node > 1 ? c.node : c.self; }

JobLayout job_layout(Context& ctx) {
  JobLayout l;
  if (ctx.rank() == 0) {
    const fabric::Provider& p = ctx.runtime().provider();
    int same = 1;
    for (int r = 1; r < ctx.size(); ++r) {
      if (p.transport(r) != p.transport(0)) {
        if (l.wire_peer == 0) l.wire_peer = r;
        continue;
      }
      ++same;
      if (l.node_peer == 0) l.node_peer = r;
    }
    l.scale = {ctx.size() / same, same};
    if (ctx.size() % same != 0) l.scale.nodes = 0;  // said on every rank below
  }
  l = ctx.runtime().bootstrap().allgather_value(l)[0];
  if (l.scale.nodes == 0) fail("objects: ", ctx.size(), " processes are not whole nodes of ", l.scale.ranks_per_node, " (rank 0's node)");
  return l;
}

Placements measure_placements(Context& ctx, const JobLayout& l, int iters) {
  Placements c;
  c.self = measure_components(ctx, iters, 0);
  if (l.node_peer != 0) c.node = measure_components(ctx, iters, l.node_peer);
  if (l.wire_peer != 0) c.wire = measure_components(ctx, iters, l.wire_peer);
  return c;
}

double predict_at(const Placements& c, Scale s, Op op, Policy p, Level l, Writers w, size_t batch) {
  if (s.nodes < 1 || s.ranks_per_node < 1) fail("objects: predict_at: ", s.nodes, " nodes of ", s.ranks_per_node, " processes");
  const double n = s.processes(), r = s.ranks_per_node;
  // An owner-invoked operation on its own part runs in place: no call.
  Components own = c.self;
  if (p == Policy::OwnerInvoked) own.rpc = own.call = own.post = 0;
  const double self = predict(own, op, p, l, batch, w), wire = s.nodes > 1 ? predict(c.wire, op, p, l, batch, w) : 0;
  const double node = s.ranks_per_node > 1 ? predict(c.node, op, p, l, batch, w) : 0;
  return (self + (r - 1) * node + (n - r) * wire) / n;
}

double predict_auto_at(const Placements& c, Scale s, Op write, Op read, Op op, Workload w, Level l) {
  if (prefer_cached(deciding(c, s), write, read, w)) return predict_at(c, s, op, Policy::Cached, l);
  return std::min(predict_at(c, s, op, Policy::OneSided, l), predict_at(c, s, op, Policy::OwnerInvoked, l));
}

}  // namespace loom::objects
