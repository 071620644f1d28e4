// Fault runs on every policy: a sweep over blocks written (or read) in one interval faults once
// per run the next time, not once per block; the run follows what the program wrote last time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "loom/coherence/space.hpp"
#include "loom/dsm/region/kernel_work.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"

using loom::coherence::Config;
using loom::coherence::Space;
using loom::test::rt;

namespace {

class FaultRuns : public ::testing::TestWithParam<loom::coherence::Policy> {};

int me() { return rt().rank(); }
int np() { return rt().size(); }
constexpr size_t kWords = 512;  // per 4 KiB block
constexpr size_t kBlocks = 16;  // within one prefetch batch

Config config(const loom::coherence::Policy& p, bool runs) {
  Config c = loom::test::config_for(p);
  c.claims = loom::coherence::Claims::Off;  // the writer's copies stay Clean between sweeps
  c.fault_runs = runs;
  c.refresh = false;  // the readers' open copies close at each acquire (test_coherence_refresh.cpp)
  return c;
}

// Rank 0 writes `n` blocks from the first, one word each; everyone else then reads all of them.
// Returns this process's faults over the write and read sweeps.
uint64_t sweep(Space& s, uint64_t* v, size_t n, uint64_t value, uint64_t& twins) {
  const auto before = s.stats();
  if (me() == 0) {
    for (size_t b = 0; b < n; ++b) v[b * kWords] = value;
  }
  s.barrier();
  if (me() != 0) {
    for (size_t b = 0; b < n; ++b) EXPECT_EQ(v[b * kWords], value) << "block " << b;
  }
  s.barrier();
  const auto after = s.stats();
  twins = after.twins - before.twins;
  return after.faults - before.faults;
}

void run_sweeps(const loom::coherence::Policy& p, bool runs) {
  Space s(rt(), config(p, runs));
  auto& r = s.create_region((kBlocks + 8) * 4096, 4096, 0);
  auto* v = r.new_array<uint64_t>(kBlocks * kWords);
  s.barrier();
  uint64_t twins = 0;
  EXPECT_EQ(sweep(s, v, kBlocks, 1, twins), kBlocks);  // first sweep: nothing to go by
  // Second sweep: the writer's blocks were published by one release, the readers' fetched in
  // one interval: one fault each, the other blocks opened by it (and fetched in one batch).
  EXPECT_EQ(sweep(s, v, kBlocks, 2, twins), runs ? 1u : kBlocks);
  EXPECT_EQ(twins, me() == 0 ? kBlocks : 0u);
  // A shorter sweep: the run opened all the blocks, but only the ones written stay in it.
  sweep(s, v, kBlocks / 2, 3, twins);
  sweep(s, v, kBlocks / 2, 4, twins);
  EXPECT_EQ(twins, me() == 0 ? kBlocks / 2 : 0u);
  s.barrier();
  s.destroy_region(r);
}

}  // namespace

TEST_P(FaultRuns, ASweepFaultsOncePerRun) {
  if (np() < 2) GTEST_SKIP() << "needs a reader";
  run_sweeps(GetParam(), true);
}

TEST_P(FaultRuns, WithoutRunsEveryBlockFaults) {
  if (np() < 2) GTEST_SKIP() << "needs a reader";
  run_sweeps(GetParam(), false);
}

LOOM_FOR_EACH_POLICY(FaultRuns);

// The kernel's part of the counters: the reader's faults open blocks with protection changes,
// counted with the pages they cover; a thread spinning beside us is seen running.
TEST_P(FaultRuns, KernelWorkIsCounted) {
  if (np() < 2) GTEST_SKIP() << "needs a reader";
  Space s(rt(), config(GetParam(), true));
  auto& r = s.create_region((kBlocks + 8) * 4096, 4096, 0);
  auto* v = r.new_array<uint64_t>(kBlocks * kWords);
  s.barrier();
  uint64_t twins = 0;
  const auto before = s.stats();
  sweep(s, v, kBlocks, 7, twins);
  const auto after = s.stats();
  EXPECT_GT(after.protect_calls, before.protect_calls);
  EXPECT_GE(after.protect_pages - before.protect_pages, after.protect_calls - before.protect_calls);
  EXPECT_GT(after.intervals, before.intervals);
  s.barrier();
  s.destroy_region(r);
}

TEST(KernelWork, ASpinningThreadIsSeenRunning) {
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {  // the spinner may wait for a CPU on a loaded host
    seen = loom::region::running_siblings() > 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  spinner.join();
  EXPECT_TRUE(seen);
}
