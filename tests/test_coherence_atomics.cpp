// Atomic words in regions (Space::new_atomic_words, AtomicRef) on every policy: exact counts
// from every process, message passing and a spin lock whose plain data must follow the word's
// release and acquire, words of one process's arena used by others with no collective, and the
// errors for plain access and for words outside atomic blocks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "loom/coherence/space.hpp"
#include "loom/dsm/common/error.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"

using loom::coherence::AtomicRef;
using loom::coherence::Order;
using loom::coherence::Space;
using loom::test::rt;

namespace {

class RegionAtomics : public loom::test::PerPolicy {};

int me() { return rt().rank(); }
int np() { return rt().size(); }

// More words than the 1024 collective AtomicWords a Space holds, over several blocks.
TEST_P(RegionAtomics, FetchAddFromEveryProcessCountsExactly) {
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096, 0);
  constexpr size_t kCount = 2000;
  uint64_t* w = s.new_atomic_words(r, kCount);
  s.barrier();
  constexpr int kRounds = 3;
  for (int k = 0; k < kRounds; ++k)
    for (size_t i = static_cast<size_t>(me()); i < kCount; i += 97) s.atomic_ref(&w[i]).fetch_add(i + 1, Order::Relaxed);
  s.barrier();
  for (size_t i = 0; i < kCount; ++i) {
    // Process p adds to the words i with i % 97 == p.
    const uint64_t visits = i % 97 < static_cast<size_t>(np()) ? 1 : 0;
    ASSERT_EQ(s.atomic_ref(&w[i]).load(Order::Relaxed), visits * kRounds * (i + 1)) << "word " << i;
  }
  s.barrier();
  s.destroy_region(r);
}

// A token passes round the ranks through one atomic word; each holder checks the plain data
// every earlier holder wrote (in other blocks, cached between turns) and adds its own.
TEST_P(RegionAtomics, MessagePassingThroughAWordCarriesPlainWrites) {
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096, 0);
  uint64_t* flag = s.new_atomic_words(r, 1);
  auto* data = r.new_array<uint64_t>(4 * 512);
  s.barrier();
  AtomicRef turn = s.atomic_ref(flag);
  constexpr uint64_t kTurns = 12;
  for (uint64_t t = 0; t < kTurns; ++t) {
    if (t % static_cast<uint64_t>(np()) != static_cast<uint64_t>(me())) continue;
    while (turn.load(Order::Acquire) != t) {
    }
    for (uint64_t k = 0; k < t; ++k) ASSERT_EQ(data[(k % 4) * 512 + k], k * 10 + 1) << "turn " << t << " entry " << k;
    data[(t % 4) * 512 + t] = t * 10 + 1;
    turn.store(t + 1, Order::Release);
  }
  s.barrier();
  for (uint64_t k = 0; k < kTurns; ++k) EXPECT_EQ(data[(k % 4) * 512 + k], k * 10 + 1);
  s.barrier();
  s.destroy_region(r);
}

// Space::fence, for threads that poll plain memory: rank 1 caches a word, tells rank 0 so by a
// flag both poll with fences, and polls the word with fences while rank 0 writes it under a lock
// — a release whose notices go with the lock, never to the fence's word: rank 1 must still see
// it (under the timestamp policies its copy outlives its lease as fences move its time on).
TEST_P(RegionAtomics, PollingWithFencesSeesWritesPublishedByFencesAndByALock) {
  if (np() < 2) GTEST_SKIP() << "rank 0 waits for rank 1";
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096, 0);
  auto* words = r.new_array<uint64_t>(1024);  // [0]: rank 1's flag; [512]: written under the lock
  auto fence_word = s.make_atomic();
  auto lock = s.make_lock();
  s.barrier();
  if (me() == 0) {
    do s.fence(fence_word);
    while (words[0] != 1);
    lock.lock();
    words[512] = 7;
    lock.unlock();
  } else if (me() == 1) {
    ASSERT_EQ(words[512], 0u);  // a cached copy from here on
    words[0] = 1;
    s.fence(fence_word);
    uint64_t fences = 0;
    do ++fences, s.fence(fence_word);
    while (words[512] != 7);
    EXPECT_GE(fences, 1u);
  }
  s.barrier();
  s.destroy_region(r);
}

// A test-and-set lock on a region word (CAS acquire, store release) guards a plain counter.
TEST_P(RegionAtomics, ASpinLockOnAWordGuardsAPlainCounter) {
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096, 0);
  uint64_t* lockw = s.new_atomic_words(r, 8);
  auto* counter = r.new_array<uint64_t>(512);
  s.barrier();
  AtomicRef lock = s.atomic_ref(&lockw[3]);
  constexpr int kIters = 20;
  for (int i = 0; i < kIters; ++i) {
    while (lock.compare_swap(0, static_cast<uint64_t>(me()) + 1, Order::Acquire) != 0) {
    }
    counter[7] += 1;
    lock.store(0, Order::Release);
  }
  s.barrier();
  EXPECT_EQ(counter[7], static_cast<uint64_t>(kIters * np()));
  s.barrier();
  s.destroy_region(r);
}

// A counter in a region passed round the ranks by a turn word, every release claiming the
// counter's block and each downgrade's owner pausing after the entry says the block is shared.
// The owner's next acquire once passed its copy by as exclusive (acquires peek at exclusive
// blocks without their mutex, and the downgrade had not yet said otherwise locally), so it read
// its own stale counter after the asker's increment: increments were lost.
class RegionAtomicsClaimed : public ::testing::TestWithParam<loom::coherence::Policy> {
 protected:
  void SetUp() override {
    loom::coherence::Config c = loom::test::config_for(GetParam());
    c.claims = loom::coherence::Claims::Always;
    space_.emplace(rt(), c);
  }
  void TearDown() override { space_.reset(); }
  std::optional<Space> space_;
};

TEST_P(RegionAtomicsClaimed, AnAcquireDuringADowngradeSeesTheAskersWrites) {
  Space& s = *space_;
  auto& r = s.create_region(1 << 20, 4096, 0);
  uint64_t* lockw = s.new_atomic_words(r, 1);
  auto* counter = r.new_array<uint64_t>(512);
  s.fault_inject_downgrade_pause(std::chrono::milliseconds(2));
  s.barrier();
  AtomicRef turn = s.atomic_ref(lockw);
  constexpr int kIters = 30;
  for (int i = 0; i < kIters; ++i) {
    uint64_t t;
    while ((t = turn.load(Order::Acquire)) % static_cast<uint64_t>(np()) != static_cast<uint64_t>(me())) {
    }
    counter[0] += 1;
    turn.store(t + 1, Order::Release);
  }
  s.barrier();
  EXPECT_EQ(counter[0], static_cast<uint64_t>(kIters * np())) << "policy " << GetParam().name();
  s.fault_inject_downgrade_pause(std::chrono::microseconds(0));
  s.barrier();
  s.destroy_region(r);
}

// Words from one process's arena: made by it alone, found by the others from the directory.
TEST_P(RegionAtomics, WordsOfOneProcessArenaNeedNoCollective) {
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096);
  auto* where = r.new_array<uint64_t*>(8);
  s.barrier();
  if (me() == 0) where[0] = s.new_atomic_words(r, 16, true);
  s.barrier();
  uint64_t* w = where[0];
  s.atomic_ref(&w[5]).fetch_add(2, Order::AcqRel);
  s.barrier();
  EXPECT_EQ(s.atomic_ref(&w[5]).load(), 2u * static_cast<uint64_t>(np()));
  s.barrier();
  s.destroy_region(r);
}

// Every thread of every process publishes versions of its own word of plain data (words of
// several threads share blocks) with a release of its atomic word, and reads the others' after
// acquiring theirs: the data is never older than the word. A fetch one thread ran while another
// thread's acquire raised the lease floor (and passed the block by, invalid then) once installed
// a copy whose lease ended below the new floor, and later acquires, finding nothing new, kept
// it: readers saw data older than the word (a queue in a region popped values out of order).
TEST_P(RegionAtomics, AFetchRacingAnotherThreadsAcquireLeavesNoStaleCopy) {
  const int threads = rt().threads_per_process();
  if (threads < 2 || np() < 2) GTEST_SKIP() << "run with 2 processes and --threads 2 (ctest coherence.threads.*)";
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096, 0);
  const int writers = np() * threads;
  uint64_t* words = s.new_atomic_words(r, static_cast<size_t>(writers));
  auto* data = r.new_array<uint64_t>(2 * 512);  // a writer's word at 16-byte steps over two blocks
  auto slot = [&](int g) { return &data[(static_cast<size_t>(g) * 2 * 512 / static_cast<size_t>(writers) + static_cast<size_t>(g)) % (2 * 512)]; };
  rt().barrier();  // (the Space's barrier waits for every thread)
  constexpr uint64_t kVersions = 400;
  std::atomic<int> stale{0};
  auto work = [&](int t) {
    const int g = me() * threads + t;
    for (uint64_t v = 1; v <= kVersions; ++v) {
      *s.writing(slot(g)) = v;
      s.atomic_ref(&words[g]).store(v, Order::Release);
      for (int k = 1; k < writers; k += 2) {
        const int o = (g + k) % writers;
        const uint64_t seen = s.atomic_ref(&words[o]).load(Order::Acquire);
        // A relaxed word load: another thread of this process may be refreshing the block.
        const uint64_t* d = s.reading(slot(o));
        if (std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(d)).load(std::memory_order_relaxed) < seen) stale.fetch_add(1);
      }
    }
    s.barrier();
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) ts.push_back(rt().spawn_at(t, "coherence-test", [&, t] { work(t); }));
  work(0);
  for (auto& t : ts) t.join();
  EXPECT_EQ(stale.load(), 0) << "reads of data older than the word acquired";
  s.destroy_region(r);
}

TEST_P(RegionAtomics, PlainAccessAndWordsOutsideAtomicBlocksAreErrors) {
  Space& s = space();
  auto& r = s.create_region(1 << 20, 4096, 0);
  uint64_t* w = s.new_atomic_words(r, 4);
  auto* plain = r.new_array<uint64_t>(512);
  s.barrier();
  EXPECT_THROW(s.declare_read(w, 8), loom::Error);
  EXPECT_THROW(s.declare_write(w + 1, 8), loom::Error);
  EXPECT_THROW(s.atomic_ref(plain), loom::Error);  // not an atomic block
  EXPECT_THROW(s.atomic_ref(reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(w) + 4)), loom::Error);
  uint64_t outside = 0;
  EXPECT_THROW(s.atomic_ref(&outside), loom::Error);
  EXPECT_THROW(s.atomic_ref(w).load(Order::Release), loom::Error);
  EXPECT_THROW(s.atomic_ref(w).store(1, Order::Acquire), loom::Error);
  EXPECT_THROW(AtomicRef{}.fetch_add(1), loom::Error);
  s.barrier();
  s.destroy_region(r);
}

}  // namespace

LOOM_FOR_EACH_POLICY(RegionAtomics);
LOOM_FOR_EACH_POLICY(RegionAtomicsClaimed);
