// Refresh at acquire on every policy: copies open for plain reads that another process wrote are
// fetched anew by the acquire and stay open (no read fault), with the right values; a streak of
// refreshes ends after Space's limit and the next read faults again; off, every read faults.
#include <gtest/gtest.h>

#include <cstdint>

#include "loom/coherence/space.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"

using loom::coherence::Config;
using loom::coherence::Space;
using loom::test::rt;

namespace {

class Refresh : public ::testing::TestWithParam<loom::coherence::Policy> {};

int me() { return rt().rank(); }
int np() { return rt().size(); }
constexpr size_t kWords = 512;  // per 4 KiB block
constexpr size_t kBlocks = 12;
constexpr int kStreak = 8;  // Space::Impl::kMaxRefreshes

Config config(const loom::coherence::Policy& p, bool refresh) {
  Config c = loom::test::config_for(p);
  c.claims = loom::coherence::Claims::Off;
  c.fault_runs = false;  // one fault per block read, so that the counts name the blocks
  c.refresh = refresh;
  return c;
}

struct Counts {
  uint64_t faults = 0, refreshes = 0;
};

// Rank 0 writes every block (every word it checks), the others then read them all.
Counts sweep(Space& s, uint64_t* v, uint64_t value) {
  const auto before = s.stats();
  if (me() == 0) {
    for (size_t b = 0; b < kBlocks; ++b) v[b * kWords] = value, v[b * kWords + kWords - 1] = value + b;
  }
  s.barrier();
  if (me() != 0) {
    for (size_t b = 0; b < kBlocks; ++b) {
      EXPECT_EQ(v[b * kWords], value) << "block " << b;
      EXPECT_EQ(v[b * kWords + kWords - 1], value + b) << "block " << b;
    }
  }
  s.barrier();
  const auto after = s.stats();
  return Counts{after.faults - before.faults, after.refreshes - before.refreshes};
}

void run(const loom::coherence::Policy& p, bool refresh) {
  Space s(rt(), config(p, refresh));
  auto& r = s.create_region((kBlocks + 8) * 4096, 4096, 0);
  auto* v = r.new_array<uint64_t>(kBlocks * kWords);
  s.barrier();
  const bool reader = me() != 0;
  sweep(s, v, 100);  // the readers' copies open (a new region's may be open already)
  // Refreshed, a copy reads without a fault kMaxRefreshes acquires in a row, then closes and its
  // read faults once: two such cycles have at most two faulting sweeps, wherever they start (an
  // acquire that revalidates the open copies instead — the directory policies at 4 processes —
  // neither refreshes nor faults, and moves no streak). Without refresh every sweep faults,
  // except such a revalidating one.
  constexpr int kSweeps = 2 * (kStreak + 1);
  uint64_t faults = 0, refreshes = 0;
  for (int k = 1; k <= kSweeps; ++k) {
    const Counts c = sweep(s, v, 100 + static_cast<uint64_t>(k));
    faults += c.faults;
    refreshes += c.refreshes;
  }
  if (reader) {
    if (refresh) {
      EXPECT_LE(faults, 2u * kBlocks);
      EXPECT_GE(refreshes, static_cast<uint64_t>(kStreak) * kBlocks);
    } else {
      EXPECT_GE(faults, static_cast<uint64_t>(kSweeps - 1) * kBlocks);
      EXPECT_EQ(refreshes, 0u);
    }
  }
  s.barrier();
  s.destroy_region(r);
}

}  // namespace

TEST_P(Refresh, OpenCopiesAreFetchedAtTheAcquire) {
  if (np() < 2) GTEST_SKIP() << "needs a reader";
  run(GetParam(), true);
}

TEST_P(Refresh, OffEveryReadFaults) {
  if (np() < 2) GTEST_SKIP() << "needs a reader";
  run(GetParam(), false);
}

LOOM_FOR_EACH_POLICY(Refresh);
