// The Queue's operations (objects/queue_ops.hpp) on a queue in this process's memory: words that
// disagree — a slot's sequence ahead of a counter that does not move, as an out-of-phase batch
// from another process can leave them — end an atomic push or pop Corrupt; it spun for ever
// (found by tests/fuzz/fuzz_object_batches). The checksum queue's steps: a slot whose WRITE has
// not landed whole is not yet a value, a lap's old value is not this lap's.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "loom/objects/queue_checksum.hpp"
#include "loom/objects/queue_ops.hpp"

using namespace loom::objects;

namespace {

struct Store {
  static constexpr size_t kCap = 4;
  std::vector<Slot<uint64_t>> slots = std::vector<Slot<uint64_t>>(kCap);
  uint64_t counters[2] = {0, 0};  // head, tail
  Store() {
    for (size_t i = 0; i < kCap; ++i) slots[i].word = i;  // slot i starts with sequence i
  }
  LocalSlots<uint64_t> local() { return LocalSlots<uint64_t>(slots.data(), counters); }
};

TEST(QueueOps, AtomicPushesAndPopsPassValuesInOrder) {
  Store st;
  auto s = st.local();
  uint64_t push_hint = 0, pop_hint = 0;
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_EQ(queue::push_atomic(s, Store::kCap, v * 10, push_hint), queue::Status::Ok);
  EXPECT_EQ(queue::push_atomic(s, Store::kCap, uint64_t{50}, push_hint), queue::Status::Full);
  for (uint64_t v = 1; v <= 4; ++v) {
    const auto p = queue::pop_atomic<LocalSlots<uint64_t>, uint64_t>(s, Store::kCap, pop_hint);
    EXPECT_EQ(p.status, queue::Status::Ok);
    EXPECT_EQ(p.value, v * 10);
  }
  EXPECT_EQ((queue::pop_atomic<LocalSlots<uint64_t>, uint64_t>(s, Store::kCap, pop_hint).status), queue::Status::Empty);
}

TEST(QueueOps, ASequenceAheadOfAStillCounterEndsAPopCorrupt) {
  Store st;
  auto s = st.local();
  st.slots[0].word = 7;  // head 0: a pop at 0 wants sequence 1; 7 is "popped meanwhile" for ever
  uint64_t hint = 0;
  EXPECT_EQ((queue::pop_atomic<LocalSlots<uint64_t>, uint64_t>(s, Store::kCap, hint).status), queue::Status::Corrupt);
}

TEST(QueueOps, ASequenceAheadOfAStillCounterEndsAPushCorrupt) {
  Store st;
  auto s = st.local();
  st.slots[0].word = 3;  // tail 0: a push at 0 wants sequence 0; 3 is "pushed meanwhile" for ever
  uint64_t hint = 0;
  EXPECT_EQ(queue::push_atomic(s, Store::kCap, uint64_t{1}, hint), queue::Status::Corrupt);
}

struct ChecksumStore : Store {
  ChecksumStore() {
    for (size_t i = 0; i < kCap; ++i) slots[i].word = queue::free_word(i);
  }
};
using Pop = queue::Popped<uint64_t>;
Pop pop_checksum(LocalSlots<uint64_t>& s, uint64_t& hint) { return queue::pop_checksum<LocalSlots<uint64_t>, uint64_t>(s, Store::kCap, hint); }

TEST(QueueOps, ChecksumPushesAndPopsPassValuesInOrderLapAfterLap) {
  ChecksumStore st;
  auto s = st.local();
  uint64_t push_hint = 0, pop_hint = 0;
  for (uint64_t lap = 0; lap < 3; ++lap) {
    for (uint64_t v = 0; v < 4; ++v) EXPECT_EQ(queue::push_checksum(s, Store::kCap, v + 10 * lap, push_hint), queue::Status::Ok);
    EXPECT_EQ(queue::push_checksum(s, Store::kCap, uint64_t{50}, push_hint), queue::Status::Full);
    for (uint64_t v = 0; v < 4; ++v) {
      const Pop p = pop_checksum(s, pop_hint);
      EXPECT_EQ(p.status, queue::Status::Ok);
      EXPECT_EQ(p.value, v + 10 * lap);
    }
    EXPECT_EQ(pop_checksum(s, pop_hint).status, queue::Status::Empty);
  }
  EXPECT_EQ(st.counters[0], 12u);
  EXPECT_EQ(st.counters[1], 12u);
}

TEST(QueueOps, AChecksumSlotWhoseWriteHasNotLandedWholeIsNotYetAValue) {
  ChecksumStore st;
  auto s = st.local();
  st.counters[1] = 1;  // a push claimed position 0 ...
  uint64_t hint = 0;
  EXPECT_EQ(pop_checksum(s, hint).status, queue::Status::Empty) << "... and its WRITE has not landed";
  st.slots[0] = {queue::stamp(uint64_t{77}, 0), 76};  // the stamp landed, the value not yet
  EXPECT_EQ(pop_checksum(s, hint).status, queue::Status::Empty);
  EXPECT_EQ(st.counters[0], 0u) << "nothing claimed";
  st.slots[0].payload = 77;  // landed whole
  const Pop p = pop_checksum(s, hint);
  EXPECT_EQ(p.status, queue::Status::Ok);
  EXPECT_EQ(p.value, 77u);
  EXPECT_EQ(st.slots[0].word, queue::free_word(Store::kCap)) << "the slot handed to the next lap";
}

TEST(QueueOps, AChecksumOfAnEarlierLapIsNotThisLaps) {
  ChecksumStore st;
  auto s = st.local();
  // Position 4 (slot 0, the second lap) claimed; the slot still holds lap one's value, popped
  // and freed wrongly (a forged free tag would be needed to get here: the stamp must not match).
  st.counters[0] = 4, st.counters[1] = 5;
  st.slots[0] = {queue::stamp(uint64_t{5}, 0), 5};
  uint64_t hint = 4;
  EXPECT_EQ(pop_checksum(s, hint).status, queue::Status::Empty);
  EXPECT_NE(queue::stamp(uint64_t{5}, 0), queue::stamp(uint64_t{5}, 4));
  EXPECT_FALSE(queue::is_free(queue::stamp(~uint64_t{0}, 3)));
}

TEST(QueueOps, AChecksumPushWaitsForTheSlotsFreeTag) {
  ChecksumStore st;
  auto s = st.local();
  uint64_t hint = 0;
  for (uint64_t v = 0; v < 4; ++v) ASSERT_EQ(queue::push_checksum(s, Store::kCap, v, hint), queue::Status::Ok);
  st.counters[0] = 1;  // a pop claimed position 0 and has not freed the slot yet
  EXPECT_EQ(queue::push_checksum(s, Store::kCap, uint64_t{9}, hint), queue::Status::Full);
  EXPECT_EQ(st.counters[1], 4u) << "nothing claimed";
  st.slots[0].word = queue::free_word(4);
  EXPECT_EQ(queue::push_checksum(s, Store::kCap, uint64_t{9}, hint), queue::Status::Ok);
  EXPECT_EQ(st.slots[0].word, queue::stamp(uint64_t{9}, 4));
}

TEST(QueueOps, AChecksumFreeTagAheadOfAStillTailEndsAPushCorrupt) {
  ChecksumStore st;
  auto s = st.local();
  st.slots[0].word = queue::free_word(8);  // tail 0: a push at 0 wants free(0); free(8) for ever
  uint64_t hint = 0;
  EXPECT_EQ(queue::push_checksum(s, Store::kCap, uint64_t{1}, hint), queue::Status::Corrupt);
}

}  // namespace
