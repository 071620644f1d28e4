// Offloading's pure pieces (dsm/signal/offload): the ready list, the command queue's active bit,
// the sleeper. Each runs producers and one consumer as threads of this process and counts that
// nothing is lost: no node, no command, no wake.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/signal/offload/command_queue.hpp"
#include "loom/dsm/signal/offload/ready_list.hpp"
#include "loom/dsm/signal/offload/sleeper.hpp"

using namespace loom::signal::offload;

namespace {
struct Item : ReadyNode {
  int id = 0;
};
}  // namespace

TEST(OffloadReadyList, EveryPushedNodeIsPoppedOnceInEachProducersOrder) {
  constexpr int kProducers = 4, kPerProducer = 20000;
  std::vector<Item> items(kProducers * kPerProducer);
  for (size_t i = 0; i < items.size(); ++i) items[i].id = static_cast<int>(i);
  ReadyList list;
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.pop(), nullptr);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) list.push(&items[static_cast<size_t>(p * kPerProducer + i)]);
    });
  std::vector<int> last(kProducers, -1);
  std::vector<bool> seen(items.size(), false);
  size_t popped = 0;
  while (popped < items.size()) {
    ReadyNode* n = list.pop();
    if (n == nullptr) {
      std::this_thread::yield();
      continue;
    }
    const int id = static_cast<Item*>(n)->id;
    ASSERT_FALSE(seen[static_cast<size_t>(id)]) << "node " << id << " popped twice";
    seen[static_cast<size_t>(id)] = true;
    const int p = id / kPerProducer;
    ASSERT_GT(id, last[static_cast<size_t>(p)]) << "a producer's nodes out of order";
    last[static_cast<size_t>(p)] = id;
    ++popped;
  }
  for (auto& t : producers) t.join();
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.pop(), nullptr);
  // A node may go in again once popped.
  list.push(&items[0]);
  EXPECT_FALSE(list.empty());
  EXPECT_EQ(list.pop(), &items[0]);
  EXPECT_TRUE(list.empty());
}

TEST(OffloadCommandQueue, RejectsACapacityThatIsNotAPowerOfTwo) {
  EXPECT_THROW(CommandQueue(48), loom::Error);
  EXPECT_THROW(CommandQueue(1), loom::Error);
}

// Requesters claim and publish; one consumer drains and drops the queue whenever it finds it
// empty, as the executor does. Every command must be consumed, in ticket order, and each drop
// must be followed by exactly one hand-over from the requester that saw the bit clear.
TEST(OffloadCommandQueue, NoCommandIsLeftInAQueueNobodyWatches) {
  constexpr int kRequesters = 4, kPerRequester = 50000;
  CommandQueue q(64);  // small: requesters also wait for free slots
  std::atomic<int> handovers{0};
  std::vector<std::thread> requesters;
  for (int r = 0; r < kRequesters; ++r)
    requesters.emplace_back([&, r] {
      for (int i = 0; i < kPerRequester; ++i) {
        CommandQueue::Claim c = q.claim();
        Command& cmd = q.slot_for(c.ticket);
        cmd.wr.wr_id = (static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(i);
        cmd.wr.imm = static_cast<uint32_t>(c.ticket);
        q.publish(c.ticket);
        if (c.activate) handovers.fetch_add(1);
      }
    });
  uint64_t consumed = 0;
  int drops = 0;
  bool watching = false;
  std::vector<int64_t> last(kRequesters, -1);
  while (consumed < uint64_t{kRequesters} * kPerRequester) {
    if (!watching) {
      if (handovers.load() <= drops) {
        std::this_thread::yield();
        continue;
      }
      watching = true;
    }
    Command* c = q.peek();
    if (c == nullptr) {
      if (q.try_deactivate()) {
        ++drops;
        watching = false;
      }
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(c->wr.imm, static_cast<uint32_t>(q.head())) << "commands come in ticket order";
    const auto r = static_cast<size_t>(c->wr.wr_id >> 32);
    const auto i = static_cast<int64_t>(c->wr.wr_id & 0xffffffffu);
    ASSERT_GT(i, last[r]);
    last[r] = i;
    q.pop();
    ++consumed;
  }
  for (auto& t : requesters) t.join();
  EXPECT_EQ(q.claimed(), consumed);
  EXPECT_EQ(q.peek(), nullptr);
  // Every drop was answered by one hand-over (the first activation came from nothing).
  EXPECT_EQ(handovers.load(), drops + (watching ? 1 : 0));
}

class OffloadSleeper : public ::testing::TestWithParam<Wake> {};

// A producer publishes work and wakes; the consumer sleeps whenever it finds none. With a lost
// wake the consumer would sleep its whole (long) timeout with work published: the test counts
// those sleeps.
TEST_P(OffloadSleeper, NoWakeIsLost) {
  Sleeper s(GetParam());
  constexpr int kRounds = 20000;
  std::atomic<int> published{0};
  int taken = 0, long_sleeps = 0;
  std::thread producer([&] {
    for (int i = 0; i < kRounds; ++i) {
      published.fetch_add(1, std::memory_order_seq_cst);
      s.wake();
      if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  while (taken < kRounds) {
    if (published.load(std::memory_order_seq_cst) > taken) {
      ++taken;
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    s.sleep([&] { return published.load(std::memory_order_seq_cst) > taken; }, std::chrono::seconds(2));
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(1)) ++long_sleeps;
  }
  producer.join();
  EXPECT_EQ(long_sleeps, 0) << "a consumer slept with work published (a lost wake)";
  EXPECT_LE(s.wakes(), static_cast<uint64_t>(kRounds));
}

INSTANTIATE_TEST_SUITE_P(Wakes, OffloadSleeper, ::testing::Values(Wake::Futex, Wake::CondVar),
                         [](const auto& info) { return info.param == Wake::Futex ? "Futex" : "CondVar"; });
