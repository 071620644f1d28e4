// The multiple-writer merge (coherence/diff.hpp).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "loom/coherence/diff.hpp"

using loom::coherence::merge_diff;

namespace {

// A byte-at-a-time reference: our changed bytes win; the private copy ends equal to the master.
void reference(std::vector<uint8_t>& master, std::vector<uint8_t>& priv, const std::vector<uint8_t>& twin) {
  for (size_t i = 0; i < master.size(); ++i)
    if (priv[i] != twin[i]) master[i] = priv[i];
  priv = master;
}

}  // namespace

TEST(MergeDiff, OurBytesOverTheMasterOthersIntoThePrivateCopy) {
  std::vector<uint8_t> twin(64, 0), priv(64, 0), master(64, 0);
  priv[3] = 7;    // ours
  master[9] = 5;  // another writer's
  merge_diff(master.data(), priv.data(), twin.data(), 64);
  EXPECT_EQ(master[3], 7);
  EXPECT_EQ(master[9], 5);
  EXPECT_EQ(priv, master);
}

TEST(MergeDiff, WritingBackTheTwinsValueIsNoChange) {
  // A byte written and restored equals the twin: it is not ours, so another writer's byte wins.
  std::vector<uint8_t> twin(8, 1), priv(8, 1), master(8, 1);
  master[0] = 9;
  merge_diff(master.data(), priv.data(), twin.data(), 8);
  EXPECT_EQ(master[0], 9);
  EXPECT_EQ(priv[0], 9);
}

TEST(MergeDiff, MatchesTheByteReferenceOnRandomBlocks) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 2000; ++round) {
    size_t n = 8 * (1 + rng() % 64);
    std::vector<uint8_t> twin(n), priv, master;
    for (auto& b : twin) b = static_cast<uint8_t>(rng());
    priv = twin;
    master = twin;
    // Disjoint writers, as data-race-free programs make: each byte is ours, theirs or neither.
    for (size_t i = 0; i < n; ++i) {
      unsigned who = rng() % 4;
      if (who == 0) priv[i] = static_cast<uint8_t>(rng());
      if (who == 1) master[i] = static_cast<uint8_t>(rng());
    }
    auto m2 = master, p2 = priv;
    reference(m2, p2, twin);
    merge_diff(master.data(), priv.data(), twin.data(), n);
    ASSERT_EQ(master, m2) << "round " << round;
    ASSERT_EQ(priv, p2) << "round " << round;
  }
}

TEST(ConflictingWrites, BytesBothWritersChangedAreCounted) {
  using loom::coherence::conflicting_writes;
  std::vector<uint8_t> twin(64, 0), priv(64, 0), master(64, 0);
  priv[3] = 7;    // ours only
  master[9] = 5;  // theirs only
  EXPECT_EQ(conflicting_writes(master.data(), priv.data(), twin.data(), 64).bytes, 0u);
  priv[20] = 1, master[20] = 2;  // both
  priv[21] = 1, master[21] = 1;  // both, the same value: still both wrote it
  priv[40] = 3, master[40] = 3;
  auto c = conflicting_writes(master.data(), priv.data(), twin.data(), 64);
  EXPECT_EQ(c.bytes, 3u);
  EXPECT_EQ(c.first, 20u);
}
