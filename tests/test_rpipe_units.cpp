// rpipe's pure pieces: the fits over a heap's free ranges (rpipe/free_ranges.hpp) and the wire
// decoders (rpipe/codec.hpp), which must refuse what a peer could send wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/rpipe/codec.hpp"
#include "loom/rpipe/free_ranges.hpp"

using namespace loom;
using namespace loom::rpipe;

namespace {

constexpr uint64_t kSeg = 4096;

// A heap of one segment with holes of 64, 256 and 128 bytes at 0, 1024 and 2048 (the rest taken).
FreeRanges with_holes(Fit f) {
  FreeRanges h(f, kSeg);
  h.add_segment(0);
  for (uint64_t at = 0; at < kSeg; at += 64) EXPECT_TRUE(h.take(64).has_value());
  h.give(0, 64);
  h.give(1024, 256);
  h.give(2048, 128);
  return h;
}

TEST(RpipeFreeRanges, BestFitTakesTheSmallestHoleThatHolds) {
  FreeRanges h = with_holes(Fit::Best);
  EXPECT_EQ(h.take(128), 2048u);
  EXPECT_EQ(h.take(64), 0u);
  EXPECT_EQ(h.take(256), 1024u);
  EXPECT_FALSE(h.take(64).has_value());
}

TEST(RpipeFreeRanges, WorstFitTakesTheLargest) {
  FreeRanges h = with_holes(Fit::Worst);
  EXPECT_EQ(h.take(64), 1024u);
  EXPECT_EQ(h.take(64), 1088u);  // 192 left there, still the largest
}

TEST(RpipeFreeRanges, NextFitGoesOnFromTheLastAllocationAndWraps) {
  FreeRanges h(Fit::Next, kSeg);
  h.add_segment(0);
  EXPECT_EQ(h.take(1024), 0u);
  EXPECT_EQ(h.take(1024), 1024u);
  h.give(0, 1024);                  // freed behind the cursor
  EXPECT_EQ(h.take(1024), 2048u);   // next fit goes on
  EXPECT_EQ(h.take(1024), 3072u);
  EXPECT_EQ(h.take(1024), 0u);      // and wraps
  EXPECT_FALSE(h.take(64).has_value());
}

TEST(RpipeFreeRanges, FreesCoalesceButNeverAcrossASegmentsEnd) {
  FreeRanges h(Fit::Best, kSeg);
  h.add_segment(0);
  h.add_segment(1);
  EXPECT_EQ(h.ranges(), 2u);  // two segments side by side in positions stay two ranges
  EXPECT_FALSE(h.take(kSeg + 64).has_value());
  auto a = h.take(kSeg), b = h.take(kSeg);
  ASSERT_TRUE(a && b);
  h.give(*a, kSeg);
  h.give(*b, kSeg);
  EXPECT_EQ(h.ranges(), 2u);
  EXPECT_EQ(h.free_bytes(), 2 * kSeg);
  auto c = h.take(64), d = h.take(64);
  h.give(*c, 64);
  h.give(*d, 64);
  EXPECT_EQ(h.largest(), kSeg);  // the two halves joined again
}

TEST(RpipeFreeRanges, DoubleFreesAndForeignRangesAreRefused) {
  FreeRanges h(Fit::Next, kSeg);
  h.add_segment(0);
  auto a = h.take(128);
  ASSERT_TRUE(a);
  h.give(*a, 128);
  EXPECT_THROW(h.give(*a, 128), Error);
  EXPECT_THROW(h.give(kSeg, 64), Error);           // outside the heap
  EXPECT_THROW(h.give(kSeg - 64, 128), Error);     // across the end
  EXPECT_THROW(h.add_segment(3), Error);           // out of order
}

TEST(RpipeCodec, ASlotIsCheckedAgainstTheHeap) {
  RAddr a;
  a.serial = 5;
  a.offset = 128;
  a.size = 100;
  a.segment = 1;
  const codec::SlotLimits lim{2, kSeg, 4};
  codec::Slot s = codec::make_slot(a, Kind::Written, 9);
  EXPECT_EQ(s.stamp, 10u);
  auto r = codec::decode_slot(s, lim, 3, 7);
  ASSERT_TRUE(r.message) << r.error;
  EXPECT_EQ(r.message->addr.writer, 3);
  EXPECT_EQ(r.message->addr.pipe, 7u);
  auto refuse = [&](codec::Slot bad, const char* what) {
    auto res = codec::decode_slot(bad, lim, 3, 7);
    EXPECT_FALSE(res.message) << what;
    EXPECT_FALSE(res.error.empty()) << what;
  };
  codec::Slot b = s;
  b.segment = 2;
  refuse(b, "segment not made");
  b = s;
  b.offset = kSeg - 64;
  refuse(b, "past the segment's end");
  b = s;
  b.offset = 130;
  refuse(b, "not unit-aligned");
  b = s;
  b.kind = 9;
  refuse(b, "unknown kind");
  b = s;
  b.serial = 4;
  refuse(b, "serial not after the last");
  b = s;
  b.size = 0;
  refuse(b, "size 0");
}

TEST(RpipeCodec, AFreeListReadWhileItChangedIsNotTaken) {
  constexpr uint32_t cap = 8;
  std::vector<uint8_t> block(codec::free_list_bytes(cap));
  const std::vector<codec::FreeRange> ranges{{0, 64}, {1024, 256}};
  codec::publish_free_list(block.data(), cap, 3, ranges);
  auto got = codec::read_free_list(block.data(), cap, 3, kSeg, 1);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[1].pos, 1024u);
  EXPECT_FALSE(codec::read_free_list(block.data(), cap, 4, kSeg, 1));  // not that version yet
  // A torn read: a range changed under the checksum.
  std::vector<uint8_t> torn = block;
  const uint64_t other = 2048;
  std::memcpy(torn.data() + codec::kFreeHeaderBytes + 16, &other, 8);
  EXPECT_FALSE(codec::read_free_list(torn.data(), cap, 3, kSeg, 1));
  // A whole list with a range outside the heap: the peer broke the protocol.
  codec::publish_free_list(block.data(), cap, 4, std::vector<codec::FreeRange>{{kSeg, 64}});
  EXPECT_THROW(codec::read_free_list(block.data(), cap, 4, kSeg, 1), Error);
}

TEST(RpipeCodec, ExtentsHoldPayloadAndFlagInWholeUnits) {
  EXPECT_EQ(codec::extent(1), 64u);
  EXPECT_EQ(codec::extent(56), 64u);
  EXPECT_EQ(codec::extent(57), 128u);
  EXPECT_EQ(codec::flag_offset(57), 64u);
}

}  // namespace
