// The tree policies' cost model (mcts_shared_tree/projection.hpp), single process: what each
// policy adds to a local rollout, how the counts carry to another scale, and the fit.
#include <gtest/gtest.h>

#include "loom/dsm/common/error.hpp"
#include "loom/mcts_shared_tree/projection.hpp"

using loom::mcts::RolloutProfile;
using loom::mcts::TreePolicy;
using loom::objects::Placements;
using loom::objects::Scale;

namespace {

Placements wire_placements() {
  Placements c;
  c.self.call = 0.05, c.self.rpc = 0.2, c.self.get = 0.01, c.self.fad = 0.01, c.self.region_acquire = 0.1, c.self.region_release_shared = 5;
  c.node = c.self;
  c.wire = c.self;
  c.wire.call = 0.5, c.wire.rpc = 20, c.wire.get = 3, c.wire.fad = 3, c.wire.region_release_shared = 40;
  return c;
}

RolloutProfile profile(Scale at) {
  RolloutProfile r;
  r.rollout_us = 4, r.word_us = 0.001, r.byte_us = 0.0001;
  r.at = at, r.edges = 300, r.calls = 3, r.misses = 0.01, r.bytes = 600, r.released = 0.01, r.syncs = 0.001;
  return r;
}

TEST(MctsProjection, RootIsOneLocalRolloutAtAnyScale) {
  const Placements c = wire_placements();
  for (int nodes : {1, 2, 64}) {
    const RolloutProfile r = loom::mcts::at_scale(profile({2, 1}), {nodes, 1});
    EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::Root, r), 4.0);
    EXPECT_DOUBLE_EQ(loom::mcts::rollouts_per_s(r, 4.0), nodes * 1e6 / 4.0);
  }
}

TEST(MctsProjection, AnOwnerInvokedCallCostsBothEndsAndItsExtraIsAdded) {
  const Placements c = wire_placements();
  RolloutProfile r = profile({2, 1});  // one worker a process: every call crosses the wire
  EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::OwnerInvoked, r), 4 + 3 * 2 * 0.5);
  r.extra_us = 1.5;
  EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::OwnerInvoked, r), 4 + 1.5 + 3 * 2 * 0.5);
  // Two processes of one node: the node's call.
  EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::OwnerInvoked, profile({1, 2})), 4 + 3 * 2 * 0.05);
}

TEST(MctsProjection, OwnerInvokedWaitsWhenTooFewRolloutsTravel) {
  const Placements c = wire_placements();
  RolloutProfile r = profile({2, 1});
  r.in_flight = 1;  // each rollout waits for its calls' one-way trips alone
  EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::OwnerInvoked, r), 3 * 20 / 2.0);
}

TEST(MctsProjection, CachedSharedSumsEveryOtherProcesssWordsOfTheEdgesItRefreshes) {
  const Placements c = wire_placements();
  RolloutProfile r = profile({2, 1});
  r.misses = r.bytes = r.released = r.syncs = 0;
  EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::CachedShared, r), 4 + 300 * 1 * 0.001);
  r.at = {8, 1};
  EXPECT_DOUBLE_EQ(loom::mcts::rollout_us(c, TreePolicy::CachedShared, r), 4 + 300 * 7 * 0.001);
}

TEST(MctsProjection, CountsCarryToAnotherScale) {
  const RolloutProfile r = profile({2, 1});
  const RolloutProfile at8 = loom::mcts::at_scale(r, {8, 1});
  EXPECT_DOUBLE_EQ(at8.calls, 3 * (1 - 1 / 8.0) / (1 - 1 / 2.0));  // a step crosses to another worker with 1 - 1/workers
  EXPECT_DOUBLE_EQ(at8.misses, 0.01 * 7);                          // the others' blocks: 7 others instead of 1
  EXPECT_DOUBLE_EQ(at8.bytes, 600.0 * 7);
  EXPECT_DOUBLE_EQ(at8.released, r.released);  // its own blocks, as many at any scale
  EXPECT_EQ(at8.at.processes(), 8);
  EXPECT_THROW(loom::mcts::at_scale(r, {0, 1}), loom::Error);
}

TEST(MctsProjection, TheFitMakesTheModelMatchTheMeasurementItWasFittedTo) {
  const Placements c = wire_placements();
  for (TreePolicy p : {TreePolicy::OwnerInvoked, TreePolicy::CachedShared}) {
    RolloutProfile r = profile({4, 1});
    const double measured = loom::mcts::rollout_us(c, p, r) + 2.5;
    r.extra_us = loom::mcts::fit_extra_us(c, p, r, measured);
    EXPECT_NEAR(r.extra_us, 2.5, 1e-12);
    EXPECT_NEAR(loom::mcts::rollout_us(c, p, r), measured, 1e-12);
    EXPECT_EQ(loom::mcts::fit_extra_us(c, p, r, 1.0), 0.0) << "faster than the components: no negative extra";
  }
  RolloutProfile none = profile({2, 1});
  none.rollout_us = 0;
  EXPECT_THROW(loom::mcts::rollout_us(c, TreePolicy::Root, none), loom::Error);
}

}  // namespace
