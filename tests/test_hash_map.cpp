// HashMap (objects/hash_map.hpp) under every policy — one-sided, owner-invoked, cached, auto —
// between processes and threads: every key inserted is found with its value at each concurrency
// level, one at a time and in batches; processes replacing the same keys while others find them
// never see a torn value; a full part and out-of-phase use are clear errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <optional>
#include <utility>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/hash_map.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::HashMap;
using loom::objects::Level;
using loom::objects::Policy;
using loom::test::rt;

namespace {

// A value whose words must all agree: a torn read shows.
struct Wide {
  uint64_t w[4];
  bool whole() const { return w[0] == w[1] && w[1] == w[2] && w[2] == w[3]; }
};

class HashMaps : public loom::test::WithContext {};

uint64_t key_of(int writer, uint64_t k) { return static_cast<uint64_t>(writer) * 100000 + k * 7919; }

// Phasal inserts of the same keys from every thread at once (each waits on the others' Busy
// words, which phasal publication turns Ready by a put): one value per key, a writer's, which
// an atomic insert then replaces.
TEST_P(HashMaps, PhasalInsertsOfOneKeyFromEveryThreadLeaveAWritersValue) {
  constexpr uint64_t kKeys = 64;
  HashMap<uint64_t, uint64_t> m(ctx(), 4096 * static_cast<size_t>(threads()), policy());
  const uint64_t writers = static_cast<uint64_t>(np() * threads());
  on_every_thread([&](int t) {
    const uint64_t id = static_cast<uint64_t>(me() * threads() + t);
    for (uint64_t k = 0; k < kKeys; ++k) m.insert(k + 1, 1000 * (k + 1) + id, Level::PhasalInsert);
    ctx().barrier();
    for (uint64_t k = 0; k < kKeys; ++k) {
      const auto v = m.find(k + 1, Level::PhasalFind);
      ASSERT_TRUE(v.has_value()) << "key " << k + 1;
      EXPECT_EQ(*v / 1000, k + 1);
      EXPECT_LT(*v % 1000, writers);
    }
    ctx().barrier();
    if (id == 0)
      for (uint64_t k = 0; k < kKeys; ++k) m.insert(k + 1, 7, Level::Atomic);
    ctx().barrier();
    for (uint64_t k = 0; k < kKeys; ++k) EXPECT_EQ(m.find(k + 1), std::optional<uint64_t>(7)) << "key " << k + 1;
    ctx().barrier();
  });
}

TEST_P(HashMaps, EveryInsertedKeyIsFoundAtEveryLevel) {
  constexpr uint64_t kPer = 200;
  HashMap<uint64_t, uint64_t> m(ctx(), 4096 * static_cast<size_t>(threads()), policy());
  const int writers = np() * threads();
  on_every_thread([&](int t) {
    const int id = me() * threads() + t;
    for (uint64_t k = 0; k < kPer; ++k) m.insert(key_of(id, k), key_of(id, k) * 3 + 1, k % 2 == 0 ? Level::Atomic : Level::PhasalInsert);
    ctx().barrier();
    for (int w = 0; w < writers; ++w)
      for (uint64_t k = 0; k < kPer; k += 3) {
        const auto v = m.find(key_of(w, k), k % 2 == 0 ? Level::Atomic : Level::PhasalFind);
        ASSERT_TRUE(v.has_value()) << "key " << key_of(w, k);
        EXPECT_EQ(*v, key_of(w, k) * 3 + 1);
      }
    EXPECT_FALSE(m.find(999999999).has_value());
    // Batched: the next writer's keys at once, with an absent one.
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < kPer; ++k) keys.push_back(key_of((id + 1) % writers, k));
    keys.push_back(123456789);
    for (Level l : {Level::PhasalFind, Level::Atomic}) {
      const auto found = m.find_many(keys, l);
      for (size_t i = 0; i + 1 < keys.size(); ++i) ASSERT_EQ(found[i], std::optional<uint64_t>(keys[i] * 3 + 1)) << "key " << keys[i];
      EXPECT_FALSE(found.back().has_value());
    }
    ctx().barrier();
  });
}

// insert_many: every item lands, and of two items with one key in a batch the later wins.
TEST_P(HashMaps, BatchedInsertsAreFoundAndTheLaterOfTwoWins) {
  constexpr uint64_t kPer = 300;
  HashMap<uint64_t, uint64_t> m(ctx(), 8192 * static_cast<size_t>(threads()), policy());
  const int writers = np() * threads();
  on_every_thread([&](int t) {
    const int id = me() * threads() + t;
    std::vector<std::pair<uint64_t, uint64_t>> items;
    for (uint64_t k = 0; k < kPer; ++k) items.emplace_back(key_of(id, k), 1);
    for (uint64_t k = 0; k < kPer; k += 10) items.emplace_back(key_of(id, k), 2);  // replaces, later in the batch
    m.insert_many(items, t % 2 == 0 ? Level::Atomic : Level::PhasalInsert);
    ctx().barrier();
    for (int w = 0; w < writers; ++w) {
      std::vector<uint64_t> keys;
      for (uint64_t k = 0; k < kPer; ++k) keys.push_back(key_of(w, k));
      const auto found = m.find_many(keys, Level::PhasalFind);
      for (uint64_t k = 0; k < kPer; ++k) ASSERT_EQ(found[k], std::optional<uint64_t>(k % 10 == 0 ? 2 : 1)) << "writer " << w << " key " << k;
    }
    ctx().barrier();
  });
}

// Every thread replaces the same 16 keys many times while finding others: every value seen is
// whole, and at the end each key holds some writer's last round.
TEST_P(HashMaps, ConcurrentReplacementsAndFindsNeverTear) {
  HashMap<uint64_t, Wide> m(ctx(), 64 * static_cast<size_t>(np()), policy());
  constexpr uint64_t kKeys = 16, kRounds = 20;
  on_every_thread([&](int t) {
    const uint64_t id = static_cast<uint64_t>(me() * threads() + t);
    for (uint64_t round = 0; round < kRounds; ++round)
      for (uint64_t k = 0; k < kKeys; ++k) {
        const uint64_t v = (id << 32) | round;
        m.insert(k * 1000003, Wide{{v, v, v, v}});
        const auto seen = m.find(((k + 5) % kKeys) * 1000003);
        if (seen) {
          ASSERT_TRUE(seen->whole()) << "a torn value under fully atomic use";
        }
      }
    ctx().barrier();
    for (uint64_t k = 0; k < kKeys; ++k) {
      const auto v = m.find(k * 1000003, Level::PhasalFind);
      ASSERT_TRUE(v.has_value());
      EXPECT_TRUE(v->whole());
      EXPECT_EQ(v->w[0] & 0xffffffff, kRounds - 1);  // every writer's last round
      EXPECT_LT(v->w[0] >> 32, static_cast<uint64_t>(np() * threads()));
    }
    ctx().barrier();
  });
}

// A full part refuses the insert with an error naming it, and nothing is lost: every key
// inserted before is found, and a key already there is still replaced.
TEST_P(HashMaps, AFullPartIsAClearErrorAndChangesNothing) {
  HashMap<uint64_t, uint64_t> m(ctx(), 4 * static_cast<size_t>(np()), policy());
  if (me() == 0) {
    std::vector<uint64_t> in;
    bool full = false;
    for (uint64_t k = 0; k < 1000 && !full; ++k) {
      try {
        m.insert(k, k + 7);
        in.push_back(k);
      } catch (const loom::Error& e) {
        full = true;
        EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
      }
    }
    ASSERT_TRUE(full) << "1000 keys went into " << m.capacity() << " buckets";
    EXPECT_LE(in.size(), m.capacity());
    for (uint64_t k : in) EXPECT_EQ(m.find(k), std::optional<uint64_t>(k + 7)) << "key " << k;
    m.insert(in.front(), 1);  // a key already there is replaced, its part full or not
    EXPECT_EQ(m.find(in.front()), std::optional<uint64_t>(1));
  }
  ctx().process_barrier();
}

// A process that made its inserts goes on to make the next object while others still ship
// inserts to it: the construction serves them first (it once waited in an allgather while they
// waited for it).
TEST_P(HashMaps, MakingAnObjectWhileOthersStillOperateOnOneDoesNotHang) {
  HashMap<uint64_t, uint64_t> a(ctx(), 1024 * static_cast<size_t>(np()), policy());
  std::vector<uint64_t> theirs;  // keys whose part is the next rank's
  for (uint64_t k = 0; theirs.size() < 200; ++k)
    if (a.owner_of(k) == (me() + 1) % np()) theirs.push_back(k);
  // Rank 0 is late: the others are already making the next map when it ships its inserts.
  if (me() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (uint64_t k : theirs) a.insert(k, k + 1);
  HashMap<uint64_t, uint64_t> b(ctx(), 1024 * static_cast<size_t>(np()), policy());
  for (uint64_t k : theirs) EXPECT_EQ(a.find(k), std::optional<uint64_t>(k + 1));
  ctx().process_barrier();
}

TEST_P(HashMaps, OutOfPhaseUseIsAClearError) {
  HashMap<uint64_t, uint64_t> m(ctx(), 64, policy());
  EXPECT_THROW(m.insert(1, 1, Level::PhasalFind), loom::Error);
  EXPECT_THROW((void)m.find(1, Level::PhasalInsert), loom::Error);
  const std::pair<uint64_t, uint64_t> one{1, 1};
  EXPECT_THROW(m.insert_many(std::span(&one, 1), Level::PhasalFind), loom::Error);
  using Map = HashMap<uint64_t, uint64_t>;
  EXPECT_THROW(Map(ctx(), 0, policy()), loom::Error);
  ctx().process_barrier();
}

INSTANTIATE_TEST_SUITE_P(Policies, HashMaps, ::testing::Values(Policy::OneSided, Policy::OwnerInvoked, Policy::Cached, Policy::Auto),
                         loom::test::policy_name);

}  // namespace
