// The one-sided Queue (objects/queue.hpp) between processes: every process pushes and pops at
// once through a queue smaller than what passes through it; nothing is lost or duplicated, and
// each consumer sees each producer's values in the order they were pushed. A full and an empty
// queue answer so; bad construction is a clear error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "dsm/common/error.hpp"
#include "objects/distributed_array.hpp"
#include "objects/queue.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::DistributedArray;
using loom::objects::Queue;
using loom::test::rt;

namespace {

class Queues : public loom::test::WithEndpoint {};

TEST_F(Queues, EveryValueArrivesOnceInEachProducersOrder) {
  constexpr uint64_t kPerProcess = 400;
  Queue<uint64_t> q(ep(), np() - 1, 32);
  DistributedArray<uint64_t> popped_total(ep(), 1);  // at rank 0
  if (me() == 0) popped_total.local()[0] = 0;
  rt().barrier();
  const uint64_t total = kPerProcess * static_cast<uint64_t>(np());
  std::vector<uint64_t> got;
  auto pop_one = [&] {
    if (auto v = q.try_pop()) {
      got.push_back(*v);
      ep().fetch_add(popped_total.ptr(0), 1);
      return true;
    }
    return false;
  };
  for (uint64_t i = 0; i < kPerProcess; ++i) {
    const uint64_t v = (static_cast<uint64_t>(me()) << 32) | i;
    while (!q.try_push(v)) pop_one();  // full: make room
    if (i % 3 == 0) pop_one();
  }
  while (ep().atomic_load(popped_total.ptr(0)) < total) pop_one();
  // Gather what everyone popped.
  std::vector<std::byte> mine(got.size() * 8);
  if (!got.empty()) std::memcpy(mine.data(), got.data(), mine.size());
  const auto all = rt().bootstrap().allgather(mine);
  std::map<uint64_t, int> count;
  for (const auto& bytes : all) {
    std::vector<uint64_t> vals(bytes.size() / 8);
    if (!vals.empty()) std::memcpy(vals.data(), bytes.data(), bytes.size());
    std::map<uint64_t, uint64_t> last;  // per producer, the last index this consumer saw
    for (uint64_t v : vals) {
      ++count[v];
      const uint64_t producer = v >> 32, index = v & 0xffffffff;
      auto it = last.find(producer);
      ASSERT_TRUE(it == last.end() || it->second < index) << "producer " << producer << ": " << index << " after " << it->second;
      last[producer] = index;
    }
  }
  EXPECT_EQ(count.size(), total);
  for (const auto& [v, c] : count) ASSERT_EQ(c, 1) << "value " << v;
  rt().barrier();
}

TEST_F(Queues, FullAndEmptyQueuesSaySo) {
  Queue<uint64_t> q(ep(), 0, 4);
  if (me() == np() - 1) {
    EXPECT_FALSE(q.try_pop().has_value());
    for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(q.try_push(i + 10));
    EXPECT_FALSE(q.try_push(99)) << "a fifth value in a queue of 4";
    for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(q.try_pop(), std::optional<uint64_t>(i + 10));
    EXPECT_FALSE(q.try_pop().has_value());
    EXPECT_TRUE(q.try_push(7));  // the next lap
    EXPECT_EQ(q.try_pop(), std::optional<uint64_t>(7));
  }
  rt().barrier();
}

TEST_F(Queues, BadHostsAndCapacitiesAreClearErrors) {
  EXPECT_THROW(Queue<uint64_t>(ep(), np(), 8), loom::Error);
  EXPECT_THROW(Queue<uint64_t>(ep(), 0, 0), loom::Error);
  rt().barrier();
}

}  // namespace
