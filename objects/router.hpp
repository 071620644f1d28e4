#pragma once
// Which policy an object's operation takes (docs/objects.md, "Policies", "Auto"): its fixed
// policy, or for an Auto object the placement the model chose when it was made (a region, or
// the owners) and, at the owners, the Chooser's current pick per operation and level.
#include <memory>

#include "loom/objects/chooser.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/cost_model.hpp"

namespace loom::objects {

class Router {
 public:
  // Collective (an Auto object's placement is rank 0's choice, for everyone). `write` and `read`
  // name the object's two kinds of operation (insert and find, push and pop).
  Router(Context& ctx, Policy policy, Op write, Op read, Workload w)
      : ctx_(ctx), policy_(policy), placement_(placement_of(ctx, policy, write, read, w)) {
    if (policy == Policy::Auto && placement_ != Policy::Cached)
      chooser_ = std::make_unique<Chooser>(ctx.components(), adaptation_enabled(), Policy::OneSided, Policy::OwnerInvoked);
  }

  Policy policy() const { return policy_; }
  // Where the data is: Cached (a region) or OneSided (at the owners, for OwnerInvoked too).
  Policy placement() const { return placement_; }
  const Chooser* chooser() const { return chooser_.get(); }
  Policy current(Op op, Level l) const {
    if (chooser_) return chooser_->current(op, l);
    return placement_ == Policy::Cached ? Policy::Cached : policy_;
  }

  // The policy for one operation; `timed`: time it and record() it.
  Policy route(Op op, Level l, bool& timed) {
    timed = false;
    if (!chooser_) return current(op, l);
    const Policy p = chooser_->pick(op, l, timed);
    // Now and then an Auto object runs the calls waiting here, so that the others' owner-invoked
    // operations (their probes, or their choice) are served while this process works one-sided.
    if (timed) ctx_.attend();
    return p;
  }
  void record(Op op, Level l, Policy used, const OpTimer& t) {
    if (t.on()) chooser_->record(op, l, used, t.us());
  }
  // A batch takes the model's cheapest policy for its size (batches are not sampled).
  Policy route_batch(Op op, Level l, size_t n) {
    if (!chooser_) return current(op, l);
    const Policy owners[] = {Policy::OneSided, Policy::OwnerInvoked};
    return cheapest(ctx_.components(), op, l, owners, n);
  }

 private:
  // The first step of every object's construction: the ones to come (allgathers, a region)
  // run no calls, so owner-invoked operations other processes still have in flight on this
  // process's objects finish here first (they would wait for it forever).
  static Policy placement_of(Context& ctx, Policy p, Op write, Op read, Workload w) {
    ctx.process_barrier();
    if (p != Policy::Auto) return p == Policy::Cached ? Policy::Cached : Policy::OneSided;
    const bool cached = prefer_cached(ctx.components(), write, read, w);
    return ctx.runtime().bootstrap().allgather_value(static_cast<uint8_t>(cached))[0] ? Policy::Cached : Policy::OneSided;
  }

  Context& ctx_;
  Policy policy_;
  Policy placement_;
  std::unique_ptr<Chooser> chooser_;
};

}  // namespace loom::objects
