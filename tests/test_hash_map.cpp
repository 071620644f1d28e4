// The one-sided HashMap (objects/hash_map.hpp) between processes: every key inserted by every
// process is found with its value at each concurrency level; processes replacing the same keys
// concurrently leave whole values (never torn); finds during inserts never see a torn value;
// batched finds; a full table and out-of-phase use are clear errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "dsm/common/error.hpp"
#include "objects/hash_map.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::Endpoint;
using loom::objects::HashMap;
using loom::objects::Level;
using loom::test::rt;

namespace {

// A value whose words must all agree: a torn read shows.
struct Wide {
  uint64_t w[4];
  bool whole() const { return w[0] == w[1] && w[1] == w[2] && w[2] == w[3]; }
};

class HashMaps : public loom::test::WithEndpoint {};

TEST_F(HashMaps, EveryInsertedKeyIsFoundAtEveryLevel) {
  const uint64_t per = 300;
  HashMap<uint64_t, uint64_t> m(ep(), 4096);
  for (uint64_t k = 0; k < per; ++k) {
    const uint64_t key = static_cast<uint64_t>(me()) * 100000 + k * 7919;
    m.insert(key, key * 3 + 1, k % 2 == 0 ? Level::Atomic : Level::PhasalInsert);
  }
  rt().barrier();
  for (int p = 0; p < np(); ++p)
    for (uint64_t k = 0; k < per; ++k) {
      const uint64_t key = static_cast<uint64_t>(p) * 100000 + k * 7919;
      const auto v = m.find(key, k % 2 == 0 ? Level::Atomic : Level::PhasalFind);
      ASSERT_TRUE(v.has_value()) << "key " << key;
      EXPECT_EQ(*v, key * 3 + 1);
    }
  EXPECT_FALSE(m.find(999999999).has_value());
  // Batched: every process's keys at once, with some absent ones.
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < per; ++k) keys.push_back(static_cast<uint64_t>((me() + 1) % np()) * 100000 + k * 7919);
  keys.push_back(123456789);
  for (Level l : {Level::PhasalFind, Level::Atomic}) {
    const auto found = m.find_many(keys, l);
    for (size_t i = 0; i + 1 < keys.size(); ++i) ASSERT_EQ(found[i], std::optional<uint64_t>(keys[i] * 3 + 1)) << "key " << keys[i];
    EXPECT_FALSE(found.back().has_value());
  }
  rt().barrier();
}

// Every process replaces the same 16 keys many times while others find them: every value seen is
// whole, and at the end each key holds one of the values written.
TEST_F(HashMaps, ConcurrentReplacementsAndFindsNeverTear) {
  HashMap<uint64_t, Wide> m(ep(), 64);
  constexpr uint64_t kKeys = 16;
  for (uint64_t round = 0; round < 30; ++round)
    for (uint64_t k = 0; k < kKeys; ++k) {
      const uint64_t v = (static_cast<uint64_t>(me()) << 32) | round;
      m.insert(k * 1000003, Wide{{v, v, v, v}});
      const auto seen = m.find(((k + 5) % kKeys) * 1000003);
      if (seen) {
        ASSERT_TRUE(seen->whole()) << "a torn value under fully atomic use";
      }
    }
  rt().barrier();
  for (uint64_t k = 0; k < kKeys; ++k) {
    const auto v = m.find(k * 1000003, Level::PhasalFind);
    ASSERT_TRUE(v.has_value());
    EXPECT_TRUE(v->whole());
    EXPECT_EQ(v->w[0] & 0xffffffff, 29u);  // every process's last round
    EXPECT_LT(v->w[0] >> 32, static_cast<uint64_t>(np()));
  }
  rt().barrier();
}

TEST_F(HashMaps, AFullTableAndOutOfPhaseUseAreClearErrors) {
  HashMap<uint64_t, uint64_t> m(ep(), 8);
  if (me() == 0) {
    for (uint64_t k = 0; k < 8; ++k) m.insert(k, k);
    try {
      m.insert(100, 1);
      ADD_FAILURE() << "an insert into a full table succeeded";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
    }
    m.insert(3, 33);  // a key already there is replaced, full or not
    EXPECT_EQ(m.find(3), std::optional<uint64_t>(33));
    EXPECT_THROW(m.insert(1, 1, Level::PhasalFind), loom::Error);
    EXPECT_THROW((void)m.find(1, Level::PhasalInsert), loom::Error);
  }
  rt().barrier();
}

}  // namespace
