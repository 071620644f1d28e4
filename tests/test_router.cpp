// Router (objects/router.hpp): which policy an object's operation takes. A fixed policy is taken
// as is (owner-invoked data lives at the owners, as one-sided's does; cached data in a region);
// an Auto object's placement is one choice for every process, and at the owners its Chooser
// picks between one-sided and owner-invoked for each operation and level.
#include <gtest/gtest.h>

#include "loom/objects/router.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::Level;
using loom::objects::Op;
using loom::objects::Policy;
using loom::objects::Router;
using loom::objects::Workload;
using loom::test::rt;

namespace {

class FixedRouters : public loom::test::WithContext {};
class AutoRouters : public loom::test::WithContext {};

TEST_P(FixedRouters, AFixedPolicyIsTakenForEveryOperationAndBatch) {
  Router r(ctx(), policy(), Op::HashInsert, Op::HashFind, Workload{});
  EXPECT_EQ(r.policy(), policy());
  EXPECT_EQ(r.placement(), policy() == Policy::Cached ? Policy::Cached : Policy::OneSided);
  EXPECT_EQ(r.chooser(), nullptr);
  for (Op op : {Op::HashInsert, Op::HashFind})
    for (Level l : {Level::Atomic, Level::PhasalRead}) {
      bool timed = true;
      EXPECT_EQ(r.route(op, l, timed), policy());
      EXPECT_FALSE(timed) << "a fixed policy is never timed";
      EXPECT_EQ(r.route_batch(op, l, 64), policy());
      EXPECT_EQ(r.current(op, l), policy());
    }
  ctx().process_barrier();
}

TEST_P(AutoRouters, AnAutoObjectsPlacementIsOneChoiceEverywhere) {
  for (double reads : {0.0, 0.5, 0.99}) {
    Router r(ctx(), Policy::Auto, Op::QueuePush, Op::QueuePop, Workload{reads, Level::Atomic, loom::objects::Writers::Many});
    EXPECT_EQ(r.policy(), Policy::Auto);
    const auto all = rt().bootstrap().allgather_value(static_cast<uint8_t>(r.placement()));
    for (uint8_t p : all) EXPECT_EQ(p, all[0]) << "read share " << reads;
    if (r.placement() == Policy::Cached) {
      EXPECT_EQ(r.chooser(), nullptr);
      bool timed = true;
      EXPECT_EQ(r.route(Op::QueuePush, Level::Atomic, timed), Policy::Cached);
    } else {
      ASSERT_NE(r.chooser(), nullptr) << "at the owners an Auto object chooses per operation";
      for (Op op : {Op::QueuePush, Op::QueuePop}) {
        bool timed = false;
        const Policy p = r.route(op, Level::Atomic, timed);
        EXPECT_TRUE(p == Policy::OneSided || p == Policy::OwnerInvoked) << loom::objects::name(p);
        const Policy b = r.route_batch(op, Level::Atomic, 256);
        EXPECT_TRUE(b == Policy::OneSided || b == Policy::OwnerInvoked) << loom::objects::name(b);
      }
    }
  }
  ctx().process_barrier();
}

INSTANTIATE_TEST_SUITE_P(Policies, FixedRouters, ::testing::Values(Policy::OneSided, Policy::OwnerInvoked, Policy::Cached),
                         loom::test::policy_name);
INSTANTIATE_TEST_SUITE_P(Policies, AutoRouters, ::testing::Values(Policy::Auto), loom::test::policy_name);

}  // namespace
