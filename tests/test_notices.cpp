// The write-notice buffer (coherence/notices.hpp): newest per block, folding, the wire form.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "coherence/notices.hpp"

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

TEST(NoticeBuffer, OverflowFoldsTheOldestIntoTheLeaseBound) {
  NoticeBuffer b(8);
  for (uint64_t k = 0; k < 9; ++k) b.add(Notice{k, 10 + k, 0});
  // A quarter folded: the newest 6 kept, min_wts the newest dropped.
  EXPECT_EQ(b.entries().size(), 6u);
  EXPECT_EQ(b.min_wts(), 12u);
  for (const Notice& n : b.entries()) EXPECT_GT(n.wts, b.min_wts());
  // A notice at or below the bound adds nothing.
  b.add(Notice{100, 12, 0});
  EXPECT_EQ(b.entries().size(), 6u);
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
