// GlobalPtr (objects/global_ptr.hpp): arithmetic in elements, differences, ordering, views.
#include <gtest/gtest.h>

#include <cstdint>

#include "loom/objects/global_ptr.hpp"

using loom::objects::GlobalPtr;

namespace {
struct Pair {
  uint64_t a, b;
};
}  // namespace

TEST(GlobalPtr, ArithmeticCountsElements) {
  GlobalPtr<Pair> p(3, 0x1000);
  EXPECT_EQ((p + 2).address(), 0x1000u + 2 * sizeof(Pair));
  EXPECT_EQ((p + 2).rank(), 3);
  EXPECT_EQ(((p + 5) - 5), p);
  EXPECT_EQ((p + 7) - p, 7);
  GlobalPtr<Pair> q = p;
  ++q;
  q += 2;
  --q;
  EXPECT_EQ(q - p, 2);
  EXPECT_LT(p, q);
}

TEST(GlobalPtr, NullUntilMadeAndViewsKeepTheAddress) {
  GlobalPtr<uint64_t> n;
  EXPECT_TRUE(n.null());
  EXPECT_FALSE(static_cast<bool>(n));
  GlobalPtr<uint64_t> p(0, 0x2000);
  EXPECT_TRUE(static_cast<bool>(p));
  auto b = p.as<std::byte>() + 3;
  EXPECT_EQ(b.address(), 0x2003u);
  EXPECT_EQ(b.rank(), 0);
  uint64_t x = 5;
  EXPECT_EQ(*GlobalPtr<uint64_t>(0, reinterpret_cast<uint64_t>(&x)).local(), 5u);
}
