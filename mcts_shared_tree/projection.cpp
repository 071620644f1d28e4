#include "loom/mcts_shared_tree/projection.hpp"

#include <algorithm>

#include "loom/dsm/common/error.hpp"

namespace loom::mcts {

namespace {

// How a process's operations on parts of every process divide: its own, its node's others',
// the ones across the wire (the Placements' three).
struct Shares {
  double self, node, wire;
};
Shares process_shares(objects::Scale s) {
  const double p = s.processes(), r = s.ranks_per_node;
  return {1 / p, (r - 1) / p, (p - r) / p};
}
double mix(const Shares& w, double self, double node, double wire) { return w.self * self + w.node * node + w.wire * wire; }

double invoked_us(const objects::Placements& c, const RolloutProfile& r) {
  // The other worker a call goes to: in the caller's process, on its node, across the wire.
  const double t = r.threads, p = r.at.processes(), per_node = r.at.ranks_per_node;
  const double others = p * t - 1;
  if (others <= 0) return r.rollout_us;  // one worker: no calls
  const Shares w{(t - 1) / others, (per_node - 1) * t / others, (p - per_node) * t / others};
  const double call = mix(w, 2 * c.self.call, 2 * c.node.call, 2 * c.wire.call);
  const double one_way = mix(w, c.self.rpc, c.node.rpc, c.wire.rpc) / 2;
  const double busy = r.rollout_us + r.extra_us + r.calls * call;
  const double waiting = r.calls * one_way / std::max<uint32_t>(1, r.in_flight);
  return std::max(busy, waiting);
}

double cached_us(const objects::Placements& c, const RolloutProfile& r) {
  const Shares w = process_shares(r.at);
  const double others = r.at.processes() - 1;
  const double sum = r.edges * others * r.word_us;
  const double miss = r.misses * mix(w, c.self.get, c.node.get, c.wire.get) + r.bytes * w.wire * r.byte_us;
  const double release = r.released * mix(w, c.self.region_release_shared, c.node.region_release_shared, c.wire.region_release_shared);
  const double acquire = r.syncs * (c.self.region_acquire + mix(w, c.self.fad, c.node.fad, c.wire.fad));
  return r.rollout_us + r.extra_us + sum + miss + release + acquire;
}

}  // namespace

RolloutProfile at_scale(const RolloutProfile& r, objects::Scale to) {
  if (to.nodes < 1 || to.ranks_per_node < 1) fail("mcts: at_scale: ", to.nodes, " nodes of ", to.ranks_per_node, " processes");
  RolloutProfile out = r;
  out.at = to;
  const double t = r.threads, from_workers = r.at.processes() * t, to_workers = to.processes() * t;
  if (from_workers > 1) out.calls = r.calls * (1 - 1 / to_workers) / (1 - 1 / from_workers);
  const double from_others = r.at.processes() - 1, to_others = to.processes() - 1;
  if (from_others > 0) out.misses = r.misses * to_others / from_others, out.bytes = r.bytes * to_others / from_others;
  return out;
}

double rollout_us(const objects::Placements& c, TreePolicy p, const RolloutProfile& r) {
  if (r.rollout_us <= 0) fail("mcts: rollout_us: the profile has no local rollout time");
  switch (p) {
    case TreePolicy::Local:
    case TreePolicy::Root: return r.rollout_us;
    case TreePolicy::OwnerInvoked: return invoked_us(c, r);
    case TreePolicy::CachedShared: return cached_us(c, r);
  }
  fail("mcts: rollout_us: unknown tree policy");
}

double fit_extra_us(const objects::Placements& c, TreePolicy p, const RolloutProfile& r, double measured_us) {
  RolloutProfile without = r;
  without.extra_us = 0;
  return std::max(0.0, measured_us - rollout_us(c, p, without));
}

}  // namespace loom::mcts
