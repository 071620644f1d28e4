// The signaling core's pure pieces: the Transmitter's ticket pool, and offloading's
// (dsm/signal/offload) ready list, command queue's active bit and sleeper. Each runs threads of
// this process and counts that nothing is lost (no node, no command, no wake) and no bound is
// passed (no more tickets in use than the pool holds).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/signal/offload/command_queue.hpp"
#include "loom/dsm/signal/offload/offloader.hpp"
#include "loom/dsm/signal/offload/ready_list.hpp"
#include "loom/dsm/signal/offload/sleeper.hpp"
#include "loom/dsm/signal/ticket_pool.hpp"

using namespace loom::signal::offload;
using loom::signal::TicketPool;

TEST(TicketPool, ATicketIsValidOnceEnoughTicketsBeforeItAreFinished) {
  for (const bool single : {false, true}) {
    TicketPool p;
    p.init(4, single);
    EXPECT_EQ(p.draw(3), 0u);
    EXPECT_TRUE(p.valid(2));
    EXPECT_EQ(p.draw(3), 3u);  // tickets 3, 4, 5
    EXPECT_TRUE(p.valid(3));
    EXPECT_FALSE(p.valid(4));
    EXPECT_EQ(p.free(), -2);
    p.give(2);  // any two finished: tickets 4 and 5 may be spent now
    EXPECT_TRUE(p.valid(5));
    EXPECT_FALSE(p.valid(6));
    EXPECT_EQ(p.free(), 0);
    p.give(4);
    EXPECT_EQ(p.free(), 4);
    EXPECT_EQ(p.draw(0), 6u);  // drawing nothing reads the next ticket
  }
}

// Threads draw one to three tickets at a time, spend each once it is valid, hold it a while and
// finish it — or give a valid one back unspent. The tickets in use never exceed the capacity.
TEST(TicketPool, TicketsInUseNeverExceedTheCapacity) {
  constexpr uint64_t kCap = 5;
  constexpr int kThreads = 6, kRounds = 20000;
  TicketPool p;
  p.init(kCap, false);
  std::atomic<int64_t> in_use{0}, most{0};
  auto worker = [&](int t) {
    for (int i = 0; i < kRounds; ++i) {
      const uint64_t n = 1 + static_cast<uint64_t>((i + t) % 3);
      const uint64_t first = p.draw(n);
      for (uint64_t k = 0; k < n; ++k) {
        while (!p.valid(first + k)) std::this_thread::yield();
        if ((i + k) % 7 == 3) {  // given back unspent
          p.give(1);
          continue;
        }
        const int64_t now = in_use.fetch_add(1) + 1;
        int64_t m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        if (i % 5 == 0) std::this_thread::yield();
        in_use.fetch_sub(1);
        p.give(1);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), static_cast<int64_t>(kCap));
  EXPECT_GT(most.load(), 1);
  EXPECT_EQ(p.free(), static_cast<int64_t>(kCap));
}

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

// An idle dynamic offloader sleeps, and a thread that wakes to nothing (its sleep's safety
// timeout, once a second) sleeps again at once: it yields its core without work only in its one
// spin-and-yield phase before the first sleep. Waking to nothing once restarted that phase
// (idle_rounds yields a second each, about 1% of a core here).
TEST(OffloadOffloader, AnIdleDynamicOffloaderSleepsWithoutYieldingAgain) {
  Offloader::Config cfg;
  cfg.mode = Mode::Dynamic;
  cfg.idle_rounds = 200;
  cfg.workers = 2;
  Offloader off(cfg);
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));  // two timeouts each
  const Offloader::Usage u = off.usage();
  EXPECT_GE(u.executor_sleeps + u.completer_sleeps, 8u) << "4 threads, each asleep more than once";
  EXPECT_LE(u.yields, 4u * cfg.idle_rounds) << "a phase of yields after a timeout";
}
