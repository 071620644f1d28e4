// Allocators: placement policies, fragmentation and coalescing, circular recycling by flush
// tags, and one registration per superchunk. Single process (a job of one).
#include <gtest/gtest.h>

#include <set>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/memory/general_allocator.hpp"
#include "loom/dsm/memory/registered_heap.hpp"
#include "loom/dsm/runtime/runtime.hpp"

using namespace loom;
using namespace loom::memory;

namespace {
// A flush source the test advances by hand, standing in for a Transmitter's completions.
struct ManualFlush : FlushSource {
  void complete_up_to(uint64_t n) { advance_flush(n); }
};

// Holes of 100, 300 and 200 bytes (at 0, 400 and 1000), separated by live blocks.
GeneralAllocator holes(Fit fit) {
  GeneralAllocator a(1300, fit, 4);
  auto h1 = a.allocate(100);   // 0
  auto b1 = a.allocate(300);   // 100
  auto h2 = a.allocate(300);   // 400
  auto b2 = a.allocate(300);   // 700
  auto h3 = a.allocate(200);   // 1000
  auto b3 = a.allocate(100);   // 1200
  EXPECT_TRUE(h1 && b1 && h2 && b2 && h3 && b3);
  EXPECT_FALSE(a.allocate(1));
  a.free(*h1);
  a.free(*h2);
  a.free(*h3);
  return a;
}
}  // namespace

TEST(GeneralAllocator, FitPoliciesChooseTheRightHole) {
  { auto a = holes(Fit::First); EXPECT_EQ(a.allocate(150), 400u); }
  { auto a = holes(Fit::Best); EXPECT_EQ(a.allocate(150), 1000u); }
  { auto a = holes(Fit::Worst); EXPECT_EQ(a.allocate(150), 400u); EXPECT_EQ(a.allocate(80), 1000u); }
  {
    auto a = holes(Fit::Next);
    EXPECT_EQ(a.allocate(50), 0u);     // the rover was past the end: wraps to the start
    EXPECT_EQ(a.allocate(50), 400u);   // continues after the last allocation, not from the start
    EXPECT_EQ(a.allocate(232), 452u);
    EXPECT_EQ(a.allocate(180), 1000u);
    EXPECT_EQ(a.allocate(40), 52u);    // wraps around to the hole left at the start
  }
}

TEST(GeneralAllocator, CoalescesAndReportsFragmentation) {
  GeneralAllocator a(1 << 20, Fit::First, 64);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(*a.allocate(4096));
  for (int i = 0; i < 64; i += 2) a.free(blocks[static_cast<size_t>(i)]);
  EXPECT_EQ(a.free_blocks(), 33u);  // 32 holes + the tail
  EXPECT_EQ(a.largest_free(), (1u << 20) - 64u * 4096);
  EXPECT_FALSE(a.allocate((1 << 20) - 32 * 4096 + 1));  // enough bytes, but fragmented
  for (int i = 1; i < 64; i += 2) a.free(blocks[static_cast<size_t>(i)]);
  EXPECT_EQ(a.free_blocks(), 1u);
  EXPECT_EQ(a.free_bytes(), 1u << 20);
  EXPECT_EQ(a.allocate(1 << 20), 0u);
}

TEST(GeneralAllocator, DoubleFreeAndBadOffsetsAreErrors) {
  GeneralAllocator a(4096, Fit::Best);
  auto x = a.allocate(100);
  ASSERT_TRUE(x);
  a.free(*x);
  EXPECT_THROW(a.free(*x), Error);
  EXPECT_THROW(a.free(12345), Error);
  EXPECT_FALSE(a.allocate(8192));
  EXPECT_THROW(GeneralAllocator(4096, Fit::Best, 3), Error);
  EXPECT_THROW(parse_fit("random"), Error);
}

class WithRuntime : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    int argc = 0;
    char** argv = nullptr;
    rt_ = new Runtime(argc, argv);
  }
  static void TearDownTestSuite() { delete rt_; }
  static Runtime* rt_;
};
Runtime* WithRuntime::rt_ = nullptr;

TEST_F(WithRuntime, RDMAAllocatorRegistersOncePerSuperchunk) {
  RDMAAllocator a(rt_->provider(), 0, 16u << 20, 0);
  std::vector<RDMAMemory> chunks;
  for (int i = 0; i < 8; ++i) chunks.push_back(a.allocate_chunk(1u << 20));  // 8 x 2 MiB in one 16 MiB
  EXPECT_EQ(a.registrations(), 1u);
  std::set<uint32_t> keys;
  for (auto& c : chunks) {
    EXPECT_EQ(c.size, 2u << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.addr) % (2u << 20), reinterpret_cast<uintptr_t>(chunks[0].addr) % (2u << 20));
    keys.insert(c.rkey);
  }
  EXPECT_EQ(keys.size(), 1u);
  auto more = a.allocate_chunk(1);
  EXPECT_NE(more.addr, nullptr);
  EXPECT_EQ(a.registrations(), 2u);
  a.free_chunk(chunks[3]);
  auto again = a.allocate_chunk(2u << 20);
  EXPECT_EQ(again.addr, chunks[3].addr);  // freed chunks are reused
  auto big = a.allocate_chunk(40u << 20);  // larger than a superchunk: its own registration
  EXPECT_EQ(a.registrations(), 3u);
  EXPECT_EQ(big.size, 40u << 20);
  EXPECT_THROW(a.free_chunk(RDMAMemory{reinterpret_cast<void*>(0x1000), 4096, 0, 0, 0}), Error);
}

TEST_F(WithRuntime, CircularAllocatorRecyclesByFlushTag) {
  ManualFlush f;
  CircularAllocator c(rt_->allocator(), 256, 4, 8, Growth::Linear);
  std::vector<Unit*> first;
  for (int i = 0; i < 4; ++i) {
    Unit* u = c.next();
    ASSERT_NE(u, nullptr);
    c.tag(u, f, static_cast<uint64_t>(i));  // tags 0..3, none complete
    first.push_back(u);
  }
  // All four busy: grows by 4 (linear) up to the maximum of 8, then refuses.
  for (int i = 0; i < 4; ++i) {
    Unit* u = c.next();
    ASSERT_NE(u, nullptr);
    c.tag(u, f, 10);
  }
  EXPECT_EQ(c.units(), 8u);
  EXPECT_EQ(c.next(), nullptr);
  // Completing flush 2 frees units tagged 0 and 1 at once, in circular order: the allocator
  // keeps the flush number it last read (0 here) and must look again.
  f.complete_up_to(2);
  Unit* a = c.next();
  Unit* b = c.next();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a, first[0]);
  EXPECT_EQ(b, first[1]);
  EXPECT_EQ(c.next(), nullptr);
  EXPECT_FALSE(c.reusable(a));  // handed out again
  CircularAllocator::release(a);
  CircularAllocator::release(b);
  EXPECT_TRUE(c.reusable(a));
  EXPECT_TRUE(c.reusable(b));
  f.complete_up_to(11);
  Unit* d = c.next();
  EXPECT_EQ(d, first[2]);  // circular order goes on where it stood
  ManualFlush g;
  EXPECT_THROW(c.tag(d, g, 1), Error);  // one allocator, one flush source
  RDMAMemory m = c.memory(d);
  EXPECT_EQ(m.bytes(), d->bytes());
  EXPECT_EQ(m.size, 256u);
  EXPECT_EQ(m.lkey, d->lkey);
}

TEST_F(WithRuntime, CircularAllocatorGrowsAtTheBusyUnitMidRing) {
  ManualFlush f;
  CircularAllocator c(rt_->allocator(), 64, 4, 12, Growth::Linear);
  Unit* u[4];
  for (int i = 0; i < 4; ++i) {
    u[i] = c.next();
    ASSERT_NE(u[i], nullptr);
    c.tag(u[i], f, i < 2 ? 0 : 5);
  }
  f.complete_up_to(1);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c.next(), u[i]);
    c.tag(u[i], f, 6);
  }
  // u[2] is busy: the ring grows by 4 there, and the new units come next, ahead of it.
  std::vector<Unit*> fresh;
  for (int i = 0; i < 4; ++i) {
    Unit* n = c.next();
    ASSERT_NE(n, nullptr);
    for (Unit* o : u) EXPECT_NE(n, o);
    fresh.push_back(n);
    c.tag(n, f, 6);
  }
  EXPECT_EQ(c.units(), 8u);
  f.complete_up_to(7);
  // The ring is now u0 u1 fresh0..3 u2 u3, and goes on at u2.
  std::vector<Unit*> want = {u[2], u[3], u[0], u[1], fresh[0], fresh[1], fresh[2], fresh[3], u[2]};
  for (Unit* w : want) {
    Unit* n = c.next();
    EXPECT_EQ(n, w);
    if (n != nullptr) CircularAllocator::release(n);
  }
  EXPECT_EQ(c.units(), 8u);
}

TEST_F(WithRuntime, CircularAllocatorGrowsExponentially) {
  ManualFlush f;
  CircularAllocator c(rt_->allocator(), 64, 2, 16, Growth::Exponential);
  for (int i = 0; i < 16; ++i) {
    Unit* u = c.next();
    ASSERT_NE(u, nullptr);
    c.tag(u, f, 1);
  }
  EXPECT_EQ(c.units(), 16u);  // 2 -> 4 -> 8 -> 16
  EXPECT_EQ(c.next(), nullptr);
}

TEST_F(WithRuntime, LinearCircularPacksSegmentsAndRecyclesUnits) {
  ManualFlush f;
  LinearCircularAllocator lc(rt_->allocator(), 1024, 2, 2);
  auto s1 = lc.allocate(100);
  auto s2 = lc.allocate(100, 64);
  ASSERT_TRUE(s1 && s2);
  EXPECT_EQ(s1->unit, s2->unit);
  EXPECT_EQ(s2->mem.bytes() - s1->mem.bytes(), 128);
  lc.tag(*s1, f, 5);
  lc.tag(*s2, f, 6);
  auto s3 = lc.allocate(900);  // does not fit: next unit
  ASSERT_TRUE(s3);
  EXPECT_NE(s3->unit, s1->unit);
  lc.tag(*s3, f, 7);
  EXPECT_FALSE(lc.allocate(1000));  // both units busy
  f.complete_up_to(7);                       // tags 5 and 6 complete; 7 not yet
  auto s4 = lc.allocate(1000);
  ASSERT_TRUE(s4);
  EXPECT_EQ(s4->unit, s1->unit);
  EXPECT_FALSE(lc.allocate(2000));  // larger than a unit
}

// A unit left behind untagged is free at once; a later tag of one of its segments still holds
// it; a second transmitter is refused.
TEST_F(WithRuntime, LinearCircularUntaggedUnitsFreeAndLateTagsHold) {
  ManualFlush f, other;
  LinearCircularAllocator lc(rt_->allocator(), 1024, 2, 2);
  auto s1 = lc.allocate(600);
  auto s2 = lc.allocate(600);  // the next unit; the first, never tagged, is free again
  ASSERT_TRUE(s1 && s2);
  EXPECT_NE(s1->unit, s2->unit);
  EXPECT_TRUE(lc.reusable(s1->unit));
  lc.tag(*s2, f, 3);
  auto s3 = lc.allocate(600);  // back to the first unit
  ASSERT_TRUE(s3);
  EXPECT_EQ(s3->unit, s1->unit);
  EXPECT_FALSE(lc.reusable(s2->unit));  // its tag 3 is not complete
  lc.tag(*s2, f, 5);                   // a late tag on the unit left behind raises its due
  f.complete_up_to(4);
  EXPECT_FALSE(lc.reusable(s2->unit));
  f.complete_up_to(6);
  EXPECT_TRUE(lc.reusable(s2->unit));
  EXPECT_THROW(lc.tag(*s3, other, 1), Error);
}

// A ring that may not grow comes round to the unit it is cutting from: once that unit's tags
// complete it is reused (before, it stayed busy for ever and a one-way service call that may not
// allocate waited for good: the checker under LOOM_COHERENCE_EXCLUSIVE=always hung).
TEST_F(WithRuntime, LinearCircularRingOfOneUnitReusesItWithoutGrowing) {
  ManualFlush f;
  LinearCircularAllocator lc(rt_->allocator(), 1024, 1, 4);
  lc.allow_growth(false);
  auto s1 = lc.allocate(600);
  ASSERT_TRUE(s1);
  lc.tag(*s1, f, 3);
  EXPECT_FALSE(lc.allocate(600));  // tag 3 not complete, and no growth
  EXPECT_EQ(lc.units(), 1u);
  f.complete_up_to(4);
  auto s2 = lc.allocate(600);
  ASSERT_TRUE(s2);
  EXPECT_EQ(s2->unit, s1->unit);
  EXPECT_EQ(lc.units(), 1u);
}

TEST_F(WithRuntime, RegisteredHeapFreesAndRejectsBadPointers) {
  RegisteredHeap h(rt_->allocator(), Fit::Best, 2u << 20);
  auto a = h.allocate(1000);
  auto b = h.allocate(3u << 20);  // larger than a region: a region of its own
  EXPECT_EQ(h.live_allocations(), 2u);
  ASSERT_TRUE(h.find(a.addr));
  EXPECT_EQ(h.find(a.addr)->lkey, a.lkey);
  h.free(a.addr);
  EXPECT_THROW(h.free(a.addr), Error);
  EXPECT_THROW(h.free(&h), Error);
  h.free(b.addr);
  EXPECT_EQ(h.live_allocations(), 0u);
}
