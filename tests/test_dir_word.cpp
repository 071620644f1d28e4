// The directory word (coherence/dir_word.hpp) and the lane scratch layout (coherence/lane.hpp).
#include <gtest/gtest.h>

#include "loom/coherence/dir_word.hpp"
#include "loom/coherence/lane.hpp"

using loom::coherence::DirEntry;
using loom::coherence::DirWord;

TEST(DirWord, RoundTripsHomeAndReadTimestamp) {
  for (int home : {0, 1, 7, 4095, DirWord::kMaxHome})
    for (uint64_t rts : {uint64_t{0}, uint64_t{1}, uint64_t{123456789}, DirWord::kRtsMask}) {
      DirWord w = DirWord::make(home, rts);
      EXPECT_EQ(w.home(), home);
      EXPECT_EQ(w.rts(), rts);
      EXPECT_FALSE(w.locked());
    }
}

TEST(DirWord, LockBitLeavesTheFieldsAlone) {
  DirWord w = DirWord::make(12, 99);
  DirWord l = w.with_lock();
  EXPECT_TRUE(l.locked());
  EXPECT_EQ(l.home(), 12);
  EXPECT_EQ(l.rts(), 99u);
  EXPECT_NE(l, w);
  EXPECT_EQ(l.without_lock(), w);
  EXPECT_EQ(l.raw, w.raw | DirWord::kLocked);
}

TEST(DirWord, FieldsDoNotBleedIntoEachOther) {
  // A read timestamp past 47 bits is cut, never carried into the atomic bit or the home.
  EXPECT_FALSE(DirWord::make(3, DirWord::kRtsMask + 1).atomic());
  EXPECT_TRUE(DirWord::make(3, 9).with_atomic().atomic());
  EXPECT_EQ(DirWord::make(3, 9).with_atomic().rts(), 9u);
  EXPECT_EQ(DirWord::make(3, 9).with_atomic().home(), 3);
  EXPECT_EQ(DirWord::make(3, DirWord::kRtsMask + 1).home(), 3);
  EXPECT_EQ(DirWord::make(3, DirWord::kRtsMask + 1).rts(), 0u);
  // A home past 15 bits never sets the lock bit.
  EXPECT_FALSE(DirWord::make(DirWord::kMaxHome + 1, 5).locked());
  // Any word from the wire decodes to a home <= kMaxHome (callers compare it with the rank count).
  EXPECT_LE(DirWord{~uint64_t{0}}.home(), DirWord::kMaxHome);
}

TEST(DirWord, EveryReleaseChangesTheWord) {
  // Releases raise rts; the same home with a higher rts is a different word.
  EXPECT_NE(DirWord::make(2, 10), DirWord::make(2, 11));
}

TEST(DirEntry, StrideHoldsTheSharersAndKeepsWord0Aligned) {
  EXPECT_EQ(DirEntry::read_bytes(false, 100), 16u);
  EXPECT_EQ(DirEntry::stride(false, 100), 16u);
  EXPECT_EQ(DirEntry::read_bytes(true, 3), 19u);
  EXPECT_EQ(DirEntry::stride(true, 3), 32u);
  for (int n = 1; n < 100; ++n) {
    EXPECT_EQ(DirEntry::stride(true, n) % 16, 0u);
    EXPECT_GE(DirEntry::stride(true, n), DirEntry::read_bytes(true, n));
  }
}

TEST(Scratch, AreasDoNotOverlap) {
  using loom::coherence::Scratch;
  const size_t words[] = {Scratch::kResult, Scratch::kCountSink, Scratch::kEpoch, Scratch::kQueueNode, Scratch::kGrant,
                          Scratch::kUnlockSink};
  for (size_t i = 0; i < std::size(words); ++i)
    for (size_t j = i + 1; j < std::size(words); ++j) EXPECT_GE(words[j], words[i] + 8);
  EXPECT_LT(Scratch::kUnlockSink + 8, Scratch::kOneByte + 1);
  EXPECT_LE(Scratch::kNoticesOut + Scratch::kAreaBytes, Scratch::kNoticesIn);
  EXPECT_LE(Scratch::kNoticesIn + Scratch::kAreaBytes, Scratch::kSharers);
  EXPECT_LE(Scratch::kSharers + Scratch::kAreaBytes, Scratch::kDirectory);
  EXPECT_LE(Scratch::kDirectory + DirEntry::read_bytes(true, Scratch::kMaxSharerBytes), Scratch::kWtsRing);
  EXPECT_LE(Scratch::kWtsRing + 8 * Scratch::kWtsSlots, Scratch::kBlock);
  EXPECT_EQ(Scratch::kBytes, Scratch::kBlock + loom::coherence::kMaxBlock);
}
