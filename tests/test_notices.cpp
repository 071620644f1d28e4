// The write-notice buffer (coherence/notices.hpp): newest per block, folding, the wire form.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "loom/coherence/notices.hpp"

using loom::coherence::kChunkBlocks;
using loom::coherence::kNoticeMagic;
using loom::coherence::Notice;
using loom::coherence::NoticeBuffer;
using loom::coherence::NoticeHeader;
using loom::coherence::notice_wire_bytes;

namespace {
std::vector<uint8_t> wire(const NoticeBuffer& b) {
  std::vector<uint8_t> out(notice_wire_bytes(b.capacity()));
  out.resize(b.serialize(out.data()));
  return out;
}
}  // namespace

TEST(NoticeBuffer, KeepsTheNewestNoticePerBlock) {
  NoticeBuffer b(8);
  b.add(Notice{1, 5, 0});
  b.add(Notice{1, 9, 2});
  b.add(Notice{1, 7, 1});
  ASSERT_EQ(b.entries().size(), 1u);
  EXPECT_EQ(b.entries()[0].wts, 9u);
  EXPECT_EQ(b.entries()[0].writer, 2u);
}

// Notices of blocks in different chunks: coalescing frees nothing, so the oldest quarter folds
// into the lease bound.
TEST(NoticeBuffer, ScatteredOverflowFoldsTheOldestIntoTheLeaseBound) {
  NoticeBuffer b(8);
  for (uint64_t k = 0; k < 9; ++k) b.add(Notice{k * kChunkBlocks, 10 + k, 0});
  // A quarter folded: the newest 6 kept, min_wts the newest dropped.
  EXPECT_EQ(b.entries().size(), 6u);
  EXPECT_EQ(b.min_wts(), 12u);
  for (const Notice& n : b.entries()) EXPECT_GT(n.wts, b.min_wts());
  // A notice at or below the bound adds nothing.
  b.add(Notice{100, 12, 0});
  EXPECT_EQ(b.entries().size(), 6u);
}

// Notices of neighbouring blocks: the oldest quarter becomes one chunk notice carrying their
// newest wts, and the lease bound stays where it was (an acquirer re-checks that chunk only).
TEST(NoticeBuffer, OverflowOfNeighboursCoalescesIntoAChunkNotice) {
  NoticeBuffer b(8);
  const uint64_t region = uint64_t{5} << 32;
  for (uint64_t k = 0; k < 9; ++k) b.add(Notice{region | (kChunkBlocks + k), 10 + k, 1});
  EXPECT_EQ(b.min_wts(), 0u);
  EXPECT_EQ(b.entries().size(), 7u);  // 6 block notices and the chunk's
  size_t chunks = 0;
  for (const Notice& n : b.entries()) {
    if (!n.chunk) {
      EXPECT_GE(n.wts, 13u);
      continue;
    }
    ++chunks;
    EXPECT_EQ(n.key, region | kChunkBlocks);
    EXPECT_EQ(n.wts, 12u);
  }
  EXPECT_EQ(chunks, 1u);
  // More writes to the chunk raise its notice; a block notice of the same key stays apart.
  for (uint64_t k = 9; k < 40; ++k) b.add(Notice{region | (kChunkBlocks + k), 10 + k, 1});
  b.add(Notice{region | kChunkBlocks, 60, 0});
  EXPECT_EQ(b.min_wts(), 0u);
  EXPECT_LE(b.entries().size(), 8u);
  size_t same_key = 0;
  for (const Notice& n : b.entries())
    if (n.key == (region | kChunkBlocks)) ++same_key;
  EXPECT_EQ(same_key, 2u);
  // The chunk survives the wire.
  NoticeBuffer c(8);
  ASSERT_TRUE(c.merge_wire(wire(b), 2));
  ASSERT_EQ(c.entries().size(), b.entries().size());
  for (size_t i = 0; i < b.entries().size(); ++i) {
    EXPECT_EQ(c.entries()[i].key, b.entries()[i].key);
    EXPECT_EQ(c.entries()[i].chunk, b.entries()[i].chunk);
    EXPECT_EQ(c.entries()[i].wts, b.entries()[i].wts);
  }
}

// A chunk notice that arrives (or rises) later removes the block notices it covers, whatever
// their order: a buffer and its wire form then hold the same entries.
TEST(NoticeBuffer, AChunkNoticeRemovesTheBlockNoticesItCovers) {
  NoticeBuffer b(16);
  b.add(Notice{2, 30, 1});
  b.add(Notice{3, 50, 1});
  b.add(Notice{kChunkBlocks + 2, 20, 1});  // another chunk
  b.add(Notice{0, 40, 0, false, true});
  ASSERT_EQ(b.entries().size(), 3u);  // block 2 (30 <= 40) is covered; block 3 (50) is not
  b.add(Notice{0, 60, 0, false, true});
  ASSERT_EQ(b.entries().size(), 2u);  // the chunk rose past block 3
  NoticeBuffer c(16);
  ASSERT_TRUE(c.merge_wire(wire(b), 2));
  EXPECT_EQ(c.entries().size(), b.entries().size());
  b.add(Notice{5, 55, 1});  // covered on arrival
  EXPECT_EQ(b.entries().size(), 2u);
}

// A chunk notice from the wire must name an aligned chunk, with no writer and no claim.
TEST(NoticeBuffer, MalformedChunkNoticesAreRefused) {
  for (const Notice bad : {Notice{3, 40, 0, false, true}, Notice{0, 40, 1, false, true}, Notice{0, 40, 0, true, true}}) {
    NoticeBuffer a(4);
    a.add(bad);
    NoticeBuffer b(4);
    EXPECT_FALSE(b.merge_wire(wire(a), 4)) << "key " << bad.key << " writer " << bad.writer << " claimed " << bad.claimed;
    EXPECT_TRUE(b.entries().empty());
  }
}

TEST(NoticeBuffer, WireRoundTrip) {
  NoticeBuffer a(16);
  a.add(Notice{(uint64_t{3} << 32) | 7, 40, 1});
  a.add(Notice{(uint64_t{3} << 32) | 8, 41, 3});
  a.raise_min_wts(5);
  NoticeBuffer b(16);
  ASSERT_TRUE(b.merge_wire(wire(a), 4));
  EXPECT_EQ(b.min_wts(), 5u);
  ASSERT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(b.entries()[1].writer, 3u);
  EXPECT_EQ(b.entries()[1].wts, 41u);
}

// A claimed release's notice says so on the wire; the flag never passes for a writer bit (a
// claimed notice from rank 3 is valid in a job of 4; an unflagged rank 0x8003 is not).
TEST(NoticeBuffer, TheClaimFlagRoundTripsBesideTheWriter) {
  NoticeBuffer a(16);
  a.add(Notice{(uint64_t{3} << 32) | 7, 40, 3, true});
  a.add(Notice{(uint64_t{3} << 32) | 8, 41, 2, false});
  NoticeBuffer b(16);
  ASSERT_TRUE(b.merge_wire(wire(a), 4));
  ASSERT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(b.entries()[0].writer, 3u);
  EXPECT_TRUE(b.entries()[0].claimed);
  EXPECT_EQ(b.entries()[1].writer, 2u);
  EXPECT_FALSE(b.entries()[1].claimed);
  NoticeBuffer big(16);
  big.add(Notice{1, 40, 0x7003, false});
  NoticeBuffer c(16);
  EXPECT_FALSE(c.merge_wire(wire(big), 4)) << "a writer outside the job";
}

TEST(NoticeBuffer, NeverWrittenBytesCarryNothing) {
  std::vector<uint8_t> zero(notice_wire_bytes(4), 0);
  NoticeBuffer b(4);
  EXPECT_TRUE(b.merge_wire(zero, 2));
  EXPECT_TRUE(b.entries().empty());
}

TEST(NoticeBuffer, MalformedBytesAreRefusedWholeAndMergeNothing) {
  NoticeBuffer a(8);
  a.add(Notice{1, 10, 0});
  a.add(Notice{2, 11, 5});  // writer 5
  auto bytes = wire(a);
  NoticeBuffer b(8);
  EXPECT_FALSE(b.merge_wire(bytes, 4)) << "a writer outside the job";
  EXPECT_TRUE(b.entries().empty());
  EXPECT_EQ(b.min_wts(), 0u);

  auto bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_FALSE(b.merge_wire(bad_magic, 8));

  auto too_many = bytes;
  NoticeHeader h;
  std::memcpy(&h, too_many.data(), sizeof h);
  h.count = 3;  // more entries than the bytes hold
  std::memcpy(too_many.data(), &h, sizeof h);
  EXPECT_FALSE(b.merge_wire(too_many, 8));

  EXPECT_FALSE(b.merge_wire(std::span<const uint8_t>(bytes.data(), 4), 8)) << "shorter than a header";
  EXPECT_TRUE(b.entries().empty());
}

TEST(NoticeBuffer, MergeTakesTheOthersBoundAndNotices) {
  NoticeBuffer a(8), b(8);
  a.add(Notice{1, 10, 0});
  a.raise_min_wts(4);
  b.add(Notice{1, 12, 1});
  b.add(Notice{2, 3, 1});
  a.merge(b);
  EXPECT_EQ(a.min_wts(), 4u);
  ASSERT_EQ(a.entries().size(), 1u) << "block 2's notice is under the bound";
  EXPECT_EQ(a.entries()[0].wts, 12u);
  EXPECT_EQ(kNoticeMagic, 0x4c4e4f54u);
}
