// Choosing one address range free in every process (dsm/region/common_range.hpp): the choice
// from gathered layouts, the layouts' words and their checks, this process's own layout.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/region/common_range.hpp"

using loom::region::AddressRange;
using loom::region::decode_layout;
using loom::region::encode_layout;
using loom::region::highest_common_gap;
using loom::region::MappedLayout;
using loom::region::read_own_layout;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

std::vector<std::byte> bytes_of(const std::vector<uint64_t>& words) {
  std::vector<std::byte> b(words.size() * 8);
  std::memcpy(b.data(), words.data(), b.size());
  return b;
}

}  // namespace

TEST(CommonRange, TakesTheHighestRangeBelowEveryProbe) {
  std::vector<MappedLayout> layouts = {{100 * kGiB, {}}, {90 * kGiB, {}}};
  auto a = highest_common_gap(layouts, {}, kGiB, 2 * kMiB, 4 * kGiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 90 * kGiB);  // the lower probe bounds it
}

TEST(CommonRange, SkipsRangesMappedInAnyProcess) {
  std::vector<MappedLayout> layouts = {{100 * kGiB, {{101 * kGiB, 120 * kGiB}}},
                                       {100 * kGiB, {{70 * kGiB, 100 * kGiB + kMiB}}},
                                       {100 * kGiB, {{60 * kGiB, 69 * kGiB + 512 * kMiB}}}};
  auto a = highest_common_gap(layouts, {}, kGiB, 2 * kMiB, 4 * kGiB);
  ASSERT_TRUE(a);
  // The gap between 69.5 and 70 GiB is too small; the next one down ends at 60 GiB.
  EXPECT_EQ(*a, 59 * kGiB);
}

TEST(CommonRange, AlignsDownInsideTheGapOrGoesLower) {
  // A gap of 1 GiB + 1 MiB starting 1 MiB past an aligned address holds no aligned range.
  std::vector<MappedLayout> layouts = {{50 * kGiB, {{10 * kGiB, 20 * kGiB + kMiB}, {21 * kGiB + 2 * kMiB, 60 * kGiB}}}};
  auto a = highest_common_gap(layouts, {}, kGiB, 4 * kMiB, 4 * kGiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 9 * kGiB);
  EXPECT_EQ(*a % (4 * kMiB), 0u);
}

TEST(CommonRange, ExcludedRangesAreTriedNoMore) {
  std::vector<MappedLayout> layouts = {{100 * kGiB, {}}};
  std::vector<AddressRange> tried = {{100 * kGiB, 101 * kGiB}, {99 * kGiB, 100 * kGiB}};
  auto a = highest_common_gap(layouts, tried, kGiB, 2 * kMiB, 4 * kGiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 98 * kGiB);
}

TEST(CommonRange, NothingAboveTheFloorIsNoAnswer) {
  std::vector<MappedLayout> layouts = {{10 * kGiB, {{5 * kGiB, 10 * kGiB + 512 * kMiB}}}};
  EXPECT_FALSE(highest_common_gap(layouts, {}, kGiB, 2 * kMiB, 5 * kGiB));
  EXPECT_EQ(highest_common_gap(layouts, {}, kGiB, 2 * kMiB, 2 * kGiB), 4 * kGiB);
  EXPECT_FALSE(highest_common_gap({}, {}, kGiB, 2 * kMiB, 0));
  std::vector<MappedLayout> top = {{~uint64_t{0} - kMiB, {}}};
  EXPECT_FALSE(highest_common_gap(top, {}, kGiB, 2 * kMiB, 0));  // probe + bytes would wrap
}

TEST(CommonRange, LayoutWordsRoundTrip) {
  MappedLayout l{77 * kGiB, {{kGiB, 2 * kGiB}, {3 * kGiB, 4 * kGiB}}};
  MappedLayout back = decode_layout(bytes_of(encode_layout(l)), 3);
  EXPECT_EQ(back.probe, l.probe);
  ASSERT_EQ(back.mapped.size(), 2u);
  EXPECT_EQ(back.mapped[1].start, 3 * kGiB);
  EXPECT_EQ(back.mapped[1].end, 4 * kGiB);
}

TEST(CommonRange, LayoutsOutOfShapeAreErrorsNamingTheRank) {
  auto expect_error = [](const std::vector<std::byte>& b) {
    try {
      decode_layout(b, 5);
      FAIL() << "no error";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
    }
  };
  expect_error(std::vector<std::byte>(12));                         // not whole words
  expect_error(bytes_of({1}));                                      // no count
  expect_error(bytes_of({1, 2, kGiB, 2 * kGiB}));                   // says 2 ranges, sends 1
  expect_error(bytes_of({1, 1, 2 * kGiB, kGiB}));                   // empty range
  expect_error(bytes_of({1, 2, 3 * kGiB, 4 * kGiB, kGiB, 2 * kGiB}));  // out of order
}

TEST(CommonRange, OwnLayoutHoldsAFreshMappingAndClosesSmallGaps) {
  void* p = mmap(nullptr, 64 * kMiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const uint64_t at = reinterpret_cast<uint64_t>(p);
  MappedLayout l = read_own_layout(0, kGiB);
  bool covered = false;
  for (size_t i = 0; i < l.mapped.size(); ++i) {
    covered = covered || (l.mapped[i].start <= at && at + 64 * kMiB <= l.mapped[i].end);
    if (i > 0) {
      EXPECT_GE(l.mapped[i].start - l.mapped[i - 1].end, kGiB);  // smaller gaps closed
    }
  }
  EXPECT_TRUE(covered);
  munmap(p, 64 * kMiB);
}
