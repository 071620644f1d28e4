// The write-notice buffer (coherence/notices.hpp): newest per block, folding, the wire form.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "loom/coherence/notices.hpp"

using loom::coherence::kChunkBlocks;
using loom::coherence::kNoticeMagic;
using loom::coherence::Notice;
using loom::coherence::NoticeBuffer;
using loom::coherence::NoticeHeader;
using loom::coherence::notice_wire_bytes;

namespace {
// The whole buffer (serialize), or the entries changed after a count (serialize_since).
std::vector<uint8_t> wire(const NoticeBuffer& b, std::optional<uint64_t> since = std::nullopt) {
  std::vector<uint8_t> out(notice_wire_bytes(b.capacity()));
  out.resize(since ? b.serialize_since(*since, out.data()) : b.serialize(out.data()));
  return out;
}
// What a buffer knows: its bound, then every (key, wts, chunk, writer), sorted.
std::vector<uint64_t> knowledge(const NoticeBuffer& b) {
  std::vector<uint64_t> k{b.min_wts()};
  std::vector<std::array<uint64_t, 4>> e;
  for (const Notice& n : b.entries()) e.push_back({n.key, n.wts, n.chunk ? 1u : 0u, n.writer});
  std::sort(e.begin(), e.end());
  for (const auto& x : e) k.insert(k.end(), x.begin(), x.end());
  return k;
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

// The barrier sends each partner only what changed since it last sent it anything: an entry
// added, raised, or made or raised by folding; never one that changed before.
TEST(NoticeBuffer, SerializeSinceCarriesOnlyTheEntriesChangedAfterACount) {
  NoticeBuffer a(8);
  a.add(Notice{1, 10, 0});
  a.add(Notice{2, 11, 1});
  const uint64_t sent = a.changes();
  a.add(Notice{2, 9, 1});   // older: no change
  EXPECT_EQ(a.changes(), sent);
  a.add(Notice{2, 15, 1});  // raised
  a.add(Notice{3, 12, 1});  // added
  a.raise_min_wts(2);
  NoticeBuffer b(8);
  ASSERT_TRUE(b.merge_wire(wire(a, sent), 4));
  EXPECT_EQ(b.min_wts(), 2u) << "the bound always travels";
  ASSERT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(b.entries()[0].key, 2u);
  EXPECT_EQ(b.entries()[0].wts, 15u);
  EXPECT_EQ(b.entries()[1].key, 3u);
  EXPECT_TRUE(wire(a, a.changes()).size() == sizeof(NoticeHeader)) << "nothing changed since the last count";
}

// A receiver that merged every delta knows what one that merged the whole buffer each time
// knows, across overflow (coalescing into chunks, folding into the bound).
TEST(NoticeBuffer, DeltasAddUpToTheWholeBufferAcrossFolds) {
  NoticeBuffer a(8), whole(8), delta(8);
  uint64_t sent = 0;
  for (uint64_t step = 1; step <= 60; ++step) {
    const uint64_t chunk = (step * 5) % 3, block = (step * 7) % kChunkBlocks;
    a.add(Notice{(uint64_t{1} << 32) | (chunk * kChunkBlocks + block), step * 10, static_cast<uint32_t>(step % 4)});
    if (step % 3 != 0) continue;  // a few changes between two barriers
    ASSERT_TRUE(whole.merge_wire(wire(a), 4));
    ASSERT_TRUE(delta.merge_wire(wire(a, sent), 4));
    sent = a.changes();
    EXPECT_EQ(knowledge(delta), knowledge(whole)) << "step " << step;
  }
  EXPECT_GT(a.min_wts() + a.entries().size(), 0u);
}
