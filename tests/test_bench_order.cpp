// The benchmarks' round orders: balanced against carry-over from one variant to the next.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "bench/balanced_order.hpp"

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
