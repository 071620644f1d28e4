// Ranges the program already has, shared where they are (Space::share_in_place): a global array
// with contents and a zeroed one, on every policy. Run under `loomrun --same-layout` the
// globals are at one address in every process; without it (address randomization) sharing them
// is refused with an error naming the ranks' addresses.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "loom/coherence/space.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"
#include "tests/test_settings_table.hpp"

using loom::coherence::Space;
using loom::test::rt;

namespace {

constexpr size_t kWords = 1024;                       // two pages
alignas(4096) uint64_t g_with_contents[kWords] = {1, 2, 3};  // .data
alignas(4096) uint64_t g_zeroed[2 * kWords];                 // .bss

class CoherenceInPlace : public loom::test::PerPolicy {};

int me() { return rt().rank(); }
int np() { return rt().size(); }

bool same_address_everywhere(const void* p) {
  const auto a = reinterpret_cast<uint64_t>(p);
  for (uint64_t v : rt().bootstrap().allgather_value(a))
    if (v != a) return false;
  return true;
}

// Every process sets the same contents before sharing (earlier tests changed them).
void reset_globals() {
  std::memset(g_with_contents, 0, sizeof g_with_contents);
  g_with_contents[0] = 1, g_with_contents[1] = 2, g_with_contents[2] = 3;
  std::memset(g_zeroed, 0, sizeof g_zeroed);
}

bool same_layout_expected() { return loom::settings::get_bool(loom::test_settings::kSameLayout); }

}  // namespace

TEST_P(CoherenceInPlace, GlobalsAreSharedWhereTheyAre) {
  Space& s = space();
  reset_globals();
  const bool same = same_address_everywhere(g_with_contents);
  if (same_layout_expected()) {
    ASSERT_TRUE(same) << "loomrun --same-layout should give every process one layout";
  }
  if (!same) {
    try {
      s.share_in_place(g_with_contents, sizeof g_with_contents);
      FAIL() << "no error for globals at different addresses";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("creation is collective"), std::string::npos) << e.what();
    }
    return;
  }
  auto& data = s.share_in_place(g_with_contents, sizeof g_with_contents);
  auto& bss = s.share_in_place(g_zeroed, sizeof g_zeroed);
  EXPECT_TRUE(data.placed());
  EXPECT_EQ(data.base(), reinterpret_cast<uint8_t*>(g_with_contents));
  EXPECT_EQ(g_with_contents[1], 2u);  // the contents are the first version
  EXPECT_EQ(g_zeroed[kWords + 7], 0u);
  s.barrier();
  // Every process writes its own words of one block (multiple writers), rank 0 one more.
  g_with_contents[100 + me()] = static_cast<uint64_t>(me()) + 10;
  g_zeroed[kWords + 3 * me()] = static_cast<uint64_t>(me()) + 20;
  if (me() == 0) g_with_contents[5] = 55;
  s.barrier();
  for (int p = 0; p < np(); ++p) {
    EXPECT_EQ(g_with_contents[100 + p], static_cast<uint64_t>(p) + 10) << "rank " << p;
    EXPECT_EQ(g_zeroed[kWords + 3 * p], static_cast<uint64_t>(p) + 20) << "rank " << p;
  }
  EXPECT_EQ(g_with_contents[5], 55u);
  EXPECT_EQ(g_with_contents[2], 3u);
  s.barrier();
  s.destroy_region(bss);
  s.destroy_region(data);
  // Private memory again, with what this process saw last; writable without a fault.
  EXPECT_EQ(g_with_contents[5], 55u);
  g_with_contents[6] = static_cast<uint64_t>(me());
  EXPECT_EQ(g_with_contents[6], static_cast<uint64_t>(me()));
}

// Memory mapped at a common address needs no common layout: shared in place, written by every
// process, and still there (private, with the last contents) after the region ends.
// Memory at one address everywhere, shared in place as it is (copied into the region) or as
// fresh memory (nothing compared or copied): a block each written and read by all; after the
// end each process keeps the contents it last saw, and blocks nobody wrote read zero.
void share_common_memory(Space& s, bool fresh) {
  constexpr size_t kBytes = size_t{4} << 20;
  uint8_t* mem = loom::region::map_at_common_address(rt().bootstrap(), kBytes, true);
  ASSERT_NE(mem, nullptr);
  EXPECT_TRUE(same_address_everywhere(mem));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mem) % (size_t{2} << 20), 0u);
  auto* words = reinterpret_cast<uint64_t*>(mem);
  auto& r = fresh ? s.share_fresh_in_place(mem, kBytes) : s.share_in_place(mem, kBytes);
  words[static_cast<size_t>(me()) * 4096] = static_cast<uint64_t>(me()) + 1;  // a block each
  s.barrier();
  for (int p = 0; p < np(); ++p) EXPECT_EQ(words[static_cast<size_t>(p) * 4096], static_cast<uint64_t>(p) + 1);
  EXPECT_EQ(words[kBytes / 8 - 1], 0u);
  s.barrier();
  s.destroy_region(r);
  for (int p = 0; p < np(); ++p) EXPECT_EQ(words[static_cast<size_t>(p) * 4096], static_cast<uint64_t>(p) + 1);
  EXPECT_EQ(words[kBytes / 8 - 2], 0u) << "a block nobody wrote";
  words[1] = 9;  // private and writable
  EXPECT_EQ(munmap(mem, kBytes), 0);
}

TEST_P(CoherenceInPlace, MemoryAtACommonAddressIsSharedInPlace) { share_common_memory(space(), false); }

TEST_P(CoherenceInPlace, FreshMemoryIsSharedInPlaceWithoutACopy) { share_common_memory(space(), true); }

LOOM_FOR_EACH_POLICY(CoherenceInPlace);

TEST(CoherenceInPlaceMisuse, BadRangesAreClearErrors) {
  Space s(rt(), loom::test::config_for(loom::coherence::Policy::parse("floating-ts")));
  reset_globals();
  auto expect_error = [](auto&& call, const char* words) {
    try {
      call();
      FAIL() << "no error; expected '" << words << "'";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error([&] { s.share_in_place(g_with_contents + 1, 4096); }, "whole 4096-byte blocks");
  expect_error([&] { s.share_in_place(g_with_contents, 100); }, "whole 4096-byte blocks");
  expect_error([&] { s.share_in_place(g_with_contents, sizeof g_with_contents, 3000); }, "power of two");
  auto& r = s.create_region(1 << 20);
  expect_error([&] { s.share_in_place(r.base(), 4096); }, "overlaps");
  if (same_address_everywhere(g_zeroed) && np() > 1) {
    // Contents that differ between processes cannot be one first version.
    g_zeroed[9] = static_cast<uint64_t>(me());
    expect_error([&] { s.share_in_place(g_zeroed, sizeof g_zeroed); }, "holds other contents");
    g_zeroed[9] = 0;
  }
  s.destroy_region(r);
}
