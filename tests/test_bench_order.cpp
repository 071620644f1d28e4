// The benchmarks' harness: round orders balanced against carry-over from one variant to the
// next, and message positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "bench/balanced_order.hpp"
#include "bench/cursor.hpp"

using loom::bench::balanced_cycle;
using loom::bench::balanced_order;

TEST(BalancedOrder, EveryVariantFollowsEveryOtherEquallyOften) {
  for (int n = 1; n <= 11; ++n) {
    const int cycle = balanced_cycle(n);
    std::vector<int> follows(static_cast<size_t>(n * n), 0), at(static_cast<size_t>(n * n), 0);
    for (int r = 0; r < cycle; ++r) {
      std::vector<int> o = balanced_order(n, r);
      ASSERT_EQ(o.size(), static_cast<size_t>(n));
      std::vector<int> sorted = o;
      std::sort(sorted.begin(), sorted.end());
      for (int j = 0; j < n; ++j) ASSERT_EQ(sorted[static_cast<size_t>(j)], j) << "n " << n << " round " << r;
      for (int j = 0; j < n; ++j) ++at[static_cast<size_t>(o[static_cast<size_t>(j)] * n + j)];
      for (int j = 1; j < n; ++j) ++follows[static_cast<size_t>(o[static_cast<size_t>(j - 1)] * n + o[static_cast<size_t>(j)])];
    }
    const int per_pair = n % 2 == 0 ? 1 : 2;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        EXPECT_EQ(follows[static_cast<size_t>(a * n + b)], a == b ? 0 : per_pair) << "n " << n << ": " << b << " after " << a;
        EXPECT_EQ(at[static_cast<size_t>(a * n + b)], cycle / n) << "n " << n << ": variant " << a << " at " << b;
      }
  }
}

TEST(BalancedOrder, RepeatsWithItsCycle) {
  EXPECT_EQ(balanced_order(8, 3), balanced_order(8, 11));
  EXPECT_EQ(balanced_order(5, 2), balanced_order(5, 12));
  EXPECT_NE(balanced_order(8, 0), balanced_order(8, 1));
}

TEST(BalancedOrder, NoVariantsIsAnEmptyRound) {
  EXPECT_TRUE(balanced_order(0, 0).empty());
  EXPECT_TRUE(balanced_order(0, 5).empty());
}

// A benchmark's message positions: consecutive, inside the window, starting again at 0.
TEST(Cursor, WalksTheWindowAndWrapsInsideIt) {
  using loom::bench::Cursor;
  constexpr size_t kWindow = 1u << 20;
  for (size_t size : {size_t{8}, size_t{24}, size_t{1000}, size_t{4096}, size_t{65536}, kWindow}) {
    Cursor c(size, kWindow - size + 1);  // a message at p covers [p, p + size)
    size_t expect = 0, wraps = 0;
    for (size_t i = 0; i < 3 * kWindow / size + 5; ++i) {
      const size_t p = c.next();
      ASSERT_LE(p + size, kWindow) << "size " << size << " message " << i;
      ASSERT_EQ(p, expect) << "size " << size << " message " << i;
      expect = p + size;
      if (expect + size > kWindow) {
        expect = 0;
        ++wraps;
      }
    }
    EXPECT_GE(wraps, 3u) << "size " << size;
  }
  Cursor ring(1, 3);  // a ring of three slots
  EXPECT_EQ(ring.next(), 0u);
  EXPECT_EQ(ring.next(), 1u);
  EXPECT_EQ(ring.next(), 2u);
  EXPECT_EQ(ring.next(), 0u);
}
