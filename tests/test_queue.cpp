// Queue (objects/queue.hpp) under every policy — one-sided, owner-invoked, cached, auto —
// between processes and threads: pushing and popping at once through a queue smaller than what
// passes through it, nothing is lost or duplicated and each consumer sees each producer's values
// in order; the same through a push phase and a pop phase, one at a time and in batches; full
// and empty queues answer so; bad construction is a clear error. Seed 001's checksum queue under
// the same traffic, and the Local level (the host's threads alone).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/hash_map.hpp"
#include "loom/objects/queue.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::Level;
using loom::objects::Policy;
using loom::objects::Queue;
using loom::objects::QueueLayout;
using loom::test::rt;

namespace {

class Queues : public loom::test::WithContext {
 protected:
  // A zeroed word at rank 0 through which processes count what they popped (fabric atomics).
  static loom::objects::GlobalPtr<uint64_t> counter_at_rank_0() {
    loom::objects::GlobalPtr<uint64_t> p;
    if (me() == 0) {
      p = ctx().endpoint().allocate<uint64_t>(0, 1);
      *p.local() = 0;
    }
    p = rt().bootstrap().allgather_value(p)[0];
    ctx().process_barrier();
    return p;
  }
  // Every thread of every process pushes its values and pops at once through q (smaller than
  // what passes through it): each value once, each producer's in order.
  static void every_value_once(Queue<uint64_t>& q);
};

uint64_t value_of(int producer, uint64_t i) { return (static_cast<uint64_t>(producer) << 32) | i; }

// Every consumer's values, gathered: each value of each producer exactly once, and each
// consumer saw each producer's values in the order they were pushed.
void check_delivery(const std::vector<std::vector<uint64_t>>& mine, uint64_t per_producer, int producers) {
  std::vector<std::byte> bytes;
  for (const auto& v : mine) {  // one consumer per thread: a count, then its values
    const uint64_t n = v.size();
    bytes.insert(bytes.end(), reinterpret_cast<const std::byte*>(&n), reinterpret_cast<const std::byte*>(&n) + 8);
    bytes.insert(bytes.end(), reinterpret_cast<const std::byte*>(v.data()), reinterpret_cast<const std::byte*>(v.data() + v.size()));
  }
  std::map<uint64_t, int> count;
  for (const auto& all : rt().bootstrap().allgather(bytes)) {
    for (size_t at = 0; at < all.size();) {
      uint64_t n;
      std::memcpy(&n, all.data() + at, 8);
      std::vector<uint64_t> vals(n);
      if (n != 0) std::memcpy(vals.data(), all.data() + at + 8, n * 8);
      at += 8 + n * 8;
      std::map<uint64_t, uint64_t> last;
      for (uint64_t v : vals) {
        ++count[v];
        const uint64_t producer = v >> 32, index = v & 0xffffffff;
        auto it = last.find(producer);
        ASSERT_TRUE(it == last.end() || it->second < index) << "producer " << producer << ": " << index << " after " << it->second;
        last[producer] = index;
      }
    }
  }
  EXPECT_EQ(count.size(), per_producer * static_cast<uint64_t>(producers));
  for (const auto& [v, c] : count) ASSERT_EQ(c, 1) << "value " << v;
}

TEST_P(Queues, EveryValueArrivesOnceInEachProducersOrder) {
  Queue<uint64_t> q(ctx(), np() - 1, 32, policy());
  every_value_once(q);
}

// Seed 001's checksum queue: the same traffic; at its host only (OneSided, OwnerInvoked).
TEST_P(Queues, AChecksumQueueMovesEveryValueOnceInEachProducersOrder) {
  if (policy() == Policy::Cached || policy() == Policy::Auto) {
    EXPECT_THROW(Queue<uint64_t>(ctx(), 0, 32, QueueLayout::Checksum, policy()), loom::Error);
    return;
  }
  Queue<uint64_t> q(ctx(), np() - 1, 32, QueueLayout::Checksum, policy());
  EXPECT_EQ(q.layout(), QueueLayout::Checksum);
  every_value_once(q);
}

void Queues::every_value_once(Queue<uint64_t>& q) {
  constexpr uint64_t kPer = 300;
  std::atomic<uint64_t> popped_here{0};
  std::vector<std::vector<uint64_t>> got(static_cast<size_t>(threads()));
  const uint64_t total = kPer * static_cast<uint64_t>(np() * threads());
  loom::objects::Endpoint& ep = ctx().endpoint();
  const loom::objects::GlobalPtr<uint64_t> popped = counter_at_rank_0();
  on_every_thread([&](int t) {
    const int id = me() * threads() + t;
    auto pop_one = [&] {
      if (auto v = q.try_pop()) {
        got[static_cast<size_t>(t)].push_back(*v);
        ep.fetch_add(popped, 1);
        popped_here.fetch_add(1);
        return true;
      }
      return false;
    };
    for (uint64_t i = 0; i < kPer; ++i) {
      while (!q.try_push(value_of(id, i))) pop_one();  // full: make room
      if (i % 3 == 0) pop_one();
    }
    while (ep.atomic_load(popped) < total) pop_one();
    ctx().barrier();
  });
  check_delivery(got, kPer, np() * threads());
  ctx().process_barrier();
  if (me() == 0) ep.deallocate(popped);
}

// A push phase (one at a time and in runs), then a pop phase (likewise), through a queue that
// holds everything: every value once, each producer's in order.
TEST_P(Queues, APushPhaseThenAPopPhaseMoveEveryValueOnce) {
  constexpr uint64_t kPer = 240;
  Queue<uint64_t> q(ctx(), 0, kPer * static_cast<size_t>(np() * threads()), policy());
  std::vector<std::vector<uint64_t>> got(static_cast<size_t>(threads()));
  on_every_thread([&](int t) {
    const int id = me() * threads() + t;
    std::vector<uint64_t> run;
    for (uint64_t i = 0; i < kPer; ++i) {
      if (i % 40 < 20) {
        ASSERT_TRUE(q.try_push(value_of(id, i), Level::PhasalPush));
        continue;
      }
      run.push_back(value_of(id, i));
      if (run.size() == 20) {
        ASSERT_EQ(q.push_many(run, Level::PhasalPush), run.size());
        run.clear();
      }
    }
    ctx().barrier();
    auto& mine = got[static_cast<size_t>(t)];
    for (bool more = true; more;) {
      const auto vals = q.pop_many(7, Level::PhasalPop);
      mine.insert(mine.end(), vals.begin(), vals.end());
      const auto one = q.try_pop(Level::PhasalPop);
      if (one) mine.push_back(*one);
      more = !vals.empty() || one.has_value();
    }
    ctx().barrier();
  });
  check_delivery(got, kPer, np() * threads());
  ctx().process_barrier();
}

// Batched pushes and pops under the fully atomic level, everyone at once.
TEST_P(Queues, AtomicBatchesMoveEveryValueOnce) {
  constexpr uint64_t kPer = 200;
  Queue<uint64_t> q(ctx(), 0, 64, policy());
  std::vector<std::vector<uint64_t>> got(static_cast<size_t>(threads()));
  const uint64_t total = kPer * static_cast<uint64_t>(np() * threads());
  loom::objects::Endpoint& ep = ctx().endpoint();
  const loom::objects::GlobalPtr<uint64_t> popped = counter_at_rank_0();
  on_every_thread([&](int t) {
    const int id = me() * threads() + t;
    auto& mine = got[static_cast<size_t>(t)];
    std::vector<uint64_t> values;
    for (uint64_t i = 0; i < kPer; ++i) values.push_back(value_of(id, i));
    size_t sent = 0;
    while (sent < values.size() || ep.atomic_load(popped) < total) {
      if (sent < values.size()) sent += q.push_many(std::span<const uint64_t>(values).subspan(sent, std::min<size_t>(16, values.size() - sent)));
      const auto vals = q.pop_many(8);
      mine.insert(mine.end(), vals.begin(), vals.end());
      if (!vals.empty()) ep.fetch_add(popped, vals.size());
    }
    ctx().barrier();
  });
  check_delivery(got, kPer, np() * threads());
  ctx().process_barrier();
  if (me() == 0) ep.deallocate(popped);
}

TEST_P(Queues, FullAndEmptyQueuesSaySo) {
  Queue<uint64_t> q(ctx(), 0, 4, policy());
  if (me() == np() - 1) {
    for (Level push : {Level::Atomic, Level::PhasalPush}) {
      const Level pop = push == Level::Atomic ? Level::Atomic : Level::PhasalPop;
      EXPECT_FALSE(q.try_pop(pop).has_value());
      for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(q.try_push(i + 10, push));
      EXPECT_FALSE(q.try_push(99, push)) << "a fifth value in a queue of 4";
      const uint64_t more[] = {1, 2};
      EXPECT_EQ(q.push_many(more, push), 0u);
      for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(q.try_pop(pop), std::optional<uint64_t>(i + 10));
      EXPECT_FALSE(q.try_pop(pop).has_value());
      EXPECT_TRUE(q.pop_many(3, pop).empty());
      EXPECT_TRUE(q.try_push(7, push));  // the next lap
      EXPECT_EQ(q.try_pop(pop), std::optional<uint64_t>(7));
    }
  }
  ctx().process_barrier();
}

TEST_P(Queues, BadHostsCapacitiesAndPhasesAreClearErrors) {
  EXPECT_THROW(Queue<uint64_t>(ctx(), np(), 8, policy()), loom::Error);
  EXPECT_THROW(Queue<uint64_t>(ctx(), 0, 0, policy()), loom::Error);
  Queue<uint64_t> q(ctx(), 0, 8, policy());
  EXPECT_THROW(q.try_push(1, Level::PhasalPop), loom::Error);
  EXPECT_THROW((void)q.try_pop(Level::PhasalPush), loom::Error);
  ctx().process_barrier();
}

TEST_P(Queues, AChecksumQueueSaysFullAndEmptyAndRefusesPhases) {
  if (policy() == Policy::Cached || policy() == Policy::Auto) return;  // refused (above)
  Queue<uint64_t> q(ctx(), 0, 4, QueueLayout::Checksum, policy());
  if (me() == np() - 1) {
    for (int lap = 0; lap < 3; ++lap) {
      EXPECT_FALSE(q.try_pop().has_value());
      for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(q.try_push(i + 10 * static_cast<uint64_t>(lap)));
      EXPECT_FALSE(q.try_push(99)) << "a fifth value in a queue of 4";
      for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(q.try_pop(), std::optional<uint64_t>(i + 10 * static_cast<uint64_t>(lap)));
    }
    const uint64_t run[] = {0, 0, 0};  // a value whose bytes are zero, three times
    EXPECT_EQ(q.push_many(run), 3u);
    EXPECT_EQ(q.pop_many(5), std::vector<uint64_t>(3, 0));
    EXPECT_THROW(q.try_push(1, Level::PhasalPush), loom::Error);
    EXPECT_THROW((void)q.try_pop(Level::PhasalPop), loom::Error);
    EXPECT_THROW((void)q.pop_many(2, Level::PhasalPop), loom::Error);
  }
  ctx().process_barrier();
}

// Level::Local: the host's threads push and pop at once on its own memory (no fabric, no
// call), then, after a barrier, every process pops what is left at the atomic level.
TEST_P(Queues, TheHostsThreadsShareTheQueueAtTheLocalLevel) {
  const int host = np() - 1;
  for (QueueLayout layout : {QueueLayout::Sequence, QueueLayout::Checksum}) {
    const bool checksum = layout == QueueLayout::Checksum;
    if (checksum && (policy() == Policy::Cached || policy() == Policy::Auto)) continue;
    Queue<uint64_t> q(ctx(), host, 64, layout, policy());
    if (q.placement() == Policy::Cached) {  // a Cached queue's words are region atomic words
      if (me() == host) {
        EXPECT_THROW(q.try_push(1, Level::Local), loom::Error);
      }
      ctx().process_barrier();
      continue;
    }
    constexpr uint64_t kPer = 400;
    std::vector<std::vector<uint64_t>> got(static_cast<size_t>(threads()));
    if (me() == host) {
      on_every_thread([&](int t) {
        auto& mine = got[static_cast<size_t>(t)];
        for (uint64_t i = 0; i < kPer; ++i) {
          while (!q.try_push(value_of(t, i), Level::Local))
            if (auto v = q.try_pop(Level::Local)) mine.push_back(*v);
          if (i % 2 == 0)
            if (auto v = q.try_pop(Level::Local)) mine.push_back(*v);
        }
      });
    } else {
      EXPECT_THROW(q.try_push(1, Level::Local), loom::Error) << "Local from a rank that is not the host";
      EXPECT_THROW((void)q.try_pop(Level::Local), loom::Error);
    }
    ctx().process_barrier();
    std::vector<std::vector<uint64_t>> rest(1);
    while (auto v = q.try_pop()) rest[0].push_back(*v);
    ctx().process_barrier();
    for (auto& r : rest) got.push_back(std::move(r));
    check_delivery(got, kPer, threads());  // the host's threads were the producers
    ctx().process_barrier();
  }
}

TEST_P(Queues, AHashMapRefusesTheLocalLevel) {
  loom::objects::HashMap<uint64_t, uint64_t> m(ctx(), 64, policy());
  EXPECT_THROW(m.insert(1, 1, Level::Local), loom::Error);
  EXPECT_THROW((void)m.find(1, Level::Local), loom::Error);
  ctx().process_barrier();
}

INSTANTIATE_TEST_SUITE_P(Policies, Queues, ::testing::Values(Policy::OneSided, Policy::OwnerInvoked, Policy::Cached, Policy::Auto),
                         loom::test::policy_name);

}  // namespace
