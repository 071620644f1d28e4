// The Queue's operations (objects/queue_ops.hpp) on a queue in this process's memory: words that
// disagree — a slot's sequence ahead of a counter that does not move, as an out-of-phase batch
// from another process can leave them — end an atomic push or pop Corrupt; it spun for ever
// (found by tests/fuzz/fuzz_object_batches).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

}  // namespace
