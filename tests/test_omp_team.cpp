// The OpenMP team across processes (omp/team.hpp), run as `loomrun -n P --threads T
// --same-layout`: regions on every thread of every process, barriers inside them, `single`,
// dynamic / guided / static loops handing out every iteration once, critical sections. Rank 0's
// master starts the regions; the other ranks serve them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "loom/coherence/space.hpp"
#include "loom/omp/adopt_contents.hpp"
#include "loom/omp/team.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"

using loom::coherence::Space;
using loom::omp::ScheduleKind;
using loom::omp::Team;
using loom::test::rt;

namespace {

constexpr int kMaxThreads = 64;
constexpr uint64_t kIterations = 5000;

// The regions' shared data, in a region: every process reads what the others wrote after a join.
struct Shared {
  uint64_t ran[kMaxThreads];
  uint64_t phase[kMaxThreads];
  uint64_t bad;
  uint64_t singles[kMaxThreads];
  uint64_t counter;
  uint64_t named_counter;
  ScheduleKind kind;
  uint64_t chunk;
  uint64_t hits[kIterations];
};

Shared* g_shared = nullptr;  // set alike in every process (the region's address is common)

void record_thread(void* data) {
  auto* s = static_cast<Shared*>(data);
  const int me = Team::thread_num();
  s->ran[me] = static_cast<uint64_t>(me) + 1;
}

void barrier_phases(void* data) {
  auto* s = static_cast<Shared*>(data);
  Team* team = Team::current();
  const int me = Team::thread_num();
  for (uint64_t round = 1; round <= 5; ++round) {
    s->phase[me] = round;
    team->barrier();
    for (int t = 0; t < team->size(); ++t)
      if (s->phase[t] != round) s->bad += 1;  // only this thread's word: no race
    team->barrier();
  }
  (void)me;
}

void take_singles(void* data) {
  auto* s = static_cast<Shared*>(data);
  Team* team = Team::current();
  for (int i = 0; i < 300; ++i) {  // more constructs than the team has words: tags wrap round
    if (team->single_start()) s->singles[Team::thread_num()] += 1;
    team->barrier();
  }
}

void share_a_loop(void* data) {
  auto* s = static_cast<Shared*>(data);
  Team* team = Team::current();
  loom::omp::LoopSpec spec;
  spec.n = kIterations;
  spec.kind = s->kind;
  spec.chunk = s->chunk;
  team->loop_start(spec);
  while (auto r = team->loop_next())
    for (uint64_t i = r->first; i < r->last; ++i) s->hits[i] += 1;
  team->barrier();
}

// A combined parallel loop: every thread has started the loop before the function runs.
void continue_a_started_loop(void* data) {
  auto* s = static_cast<Shared*>(data);
  while (auto r = Team::loop_next())
    for (uint64_t i = r->first; i < r->last; ++i) s->hits[Team::current_loop().value(i)] += 1;
  Team::barrier();
}

// A region inside a region runs on its thread alone: a team of one, its loop whole.
void inner_region(void* data) {
  auto* s = static_cast<Shared*>(data);
  EXPECT_EQ(Team::current(), nullptr);
  EXPECT_TRUE(Team::single_start());
  loom::omp::LoopSpec spec;
  spec.n = 10;
  Team::loop_start(spec);
  auto r = Team::loop_next();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->last - r->first, 10u);
  EXPECT_FALSE(Team::loop_next());
  s->phase[0] += 0;  // touches shared memory from the inner region
}

void outer_region(void* data) {
  auto* s = static_cast<Shared*>(data);
  const int me = Team::thread_num();
  Team::run_serialized(inner_region, data);
  EXPECT_EQ(Team::thread_num(), me);  // restored
  s->ran[me] = 100 + static_cast<uint64_t>(me);
}

void count_under_critical(void* data) {
  auto* s = static_cast<Shared*>(data);
  Team* team = Team::current();
  for (int i = 0; i < 50; ++i) {
    team->critical_start();
    s->counter += 1;
    team->critical_end();
    team->critical_start(&g_shared);
    s->named_counter += 2;
    team->critical_end(&g_shared);
  }
}

class OmpTeam : public ::testing::Test {
 protected:
  void SetUp() override {
    space_.emplace(rt(), loom::test::config_for(loom::coherence::Policy::parse(policy())));
    region_ = &space_->create_region(1 << 20, 4096, 0);
    g_shared = static_cast<Shared*>(region_->allocate(sizeof(Shared), 4096));
  }
  void TearDown() override {
    space_->destroy_region(*region_);
    space_.reset();
  }
  static std::string policy() {
    const char* p = std::getenv("LOOM_COHERENCE_POLICY");
    return p != nullptr ? p : "floating-ts";
  }
  // Rank 0's master runs `body` with the team; the others serve until it ends.
  template <typename Body>
  void with_team(Body body) {
    Team team(*space_);
    ASSERT_LE(team.size(), kMaxThreads);
    if (rt().rank() == 0) {
      body(team);
    } else {
      team.serve();
    }
  }
  std::optional<Space> space_;
  loom::region::Region* region_ = nullptr;
};

}  // namespace

TEST_F(OmpTeam, RegionsRunOnEveryThreadOfEveryProcess) {
  with_team([](Team& team) {
    EXPECT_EQ(team.size(), rt().size() * rt().threads_per_process());
    for (int round = 0; round < 3; ++round) team.parallel(record_thread, g_shared);
    for (int t = 0; t < team.size(); ++t) EXPECT_EQ(g_shared->ran[t], static_cast<uint64_t>(t) + 1) << "thread " << t;
    EXPECT_EQ(Team::current(), nullptr);
    EXPECT_EQ(Team::thread_num(), 0);
    try {
      team.parallel(record_thread, g_shared, static_cast<unsigned>(team.size()) + 1);
      ADD_FAILURE() << "no error for a team of another size";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("every region runs on all"), std::string::npos) << e.what();
    }
  });
}

TEST_F(OmpTeam, BarriersInsideARegion) {
  with_team([](Team& team) {
    team.parallel(barrier_phases, g_shared);
    EXPECT_EQ(g_shared->bad, 0u);
  });
}

TEST_F(OmpTeam, EachSingleIsTakenByOneThread) {
  with_team([](Team& team) {
    team.parallel(take_singles, g_shared);
    uint64_t total = 0;
    for (int t = 0; t < team.size(); ++t) total += g_shared->singles[t];
    EXPECT_EQ(total, 300u);
  });
}

TEST_F(OmpTeam, LoopsHandOutEveryIterationOnce) {
  with_team([](Team& team) {
    const std::pair<ScheduleKind, uint64_t> cases[] = {
        {ScheduleKind::Dynamic, 1}, {ScheduleKind::Dynamic, 37}, {ScheduleKind::Guided, 4}, {ScheduleKind::Static, 0}, {ScheduleKind::Static, 16}};
    uint64_t expect = 0;
    for (const auto& [kind, chunk] : cases) {
      g_shared->kind = kind;
      g_shared->chunk = chunk;
      team.parallel(share_a_loop, g_shared);
      ++expect;
      for (uint64_t i = 0; i < kIterations; ++i) ASSERT_EQ(g_shared->hits[i], expect) << "iteration " << i << " chunk " << chunk;
    }
  });
}

TEST_F(OmpTeam, CriticalSectionsExcludeAcrossProcesses) {
  with_team([](Team& team) {
    team.parallel(count_under_critical, g_shared);
    EXPECT_EQ(g_shared->counter, 50u * static_cast<uint64_t>(team.size()));
    EXPECT_EQ(g_shared->named_counter, 100u * static_cast<uint64_t>(team.size()));
  });
}

TEST_F(OmpTeam, ACombinedParallelLoopStartsBeforeTheFunction) {
  with_team([](Team& team) {
    loom::omp::LoopSpec spec;
    spec.n = kIterations / 2;
    spec.kind = ScheduleKind::Dynamic;
    spec.chunk = 8;
    spec.start = kIterations - 1;  // downwards, every other index
    spec.step = static_cast<uint64_t>(-2);
    team.parallel(continue_a_started_loop, g_shared, 0, &spec);
    for (uint64_t i = 0; i < kIterations; ++i) ASSERT_EQ(g_shared->hits[i], i % 2 == 1 ? 1u : 0u) << "index " << i;
  });
}

TEST_F(OmpTeam, NestedRegionsAreSerialized) {
  with_team([](Team& team) {
    team.parallel(outer_region, g_shared);
    for (int t = 0; t < team.size(); ++t) EXPECT_EQ(g_shared->ran[t], 100u + static_cast<uint64_t>(t));
  });
}

// Every critical-section name (and OpenMP lock variable) is a lock of its own: a thread holds 16
// at once — names 7 bytes apart, which hashed onto 16 locks shared some — and the table's
// 512 entries hold 512 names; the next distinct name is an error naming the limit.
TEST_F(OmpTeam, EveryNameIsALockOfItsOwnUpToTheTablesSize) {
  with_team([](Team& team) {
    constexpr size_t kEntries = loom::omp::NamedLocks::kEntries;
    static char names[kEntries + 1];
    for (int i = 0; i < 16; ++i) team.critical_start(&names[i * 7]);
    EXPECT_FALSE(team.critical_try(&names[0])) << "held by this thread";
    for (int i = 15; i >= 0; --i) team.critical_end(&names[i * 7]);
    EXPECT_TRUE(team.critical_try(&names[0]));
    team.critical_end(&names[0]);
    for (size_t i = 0; i < kEntries; ++i) {
      team.critical_start(&names[i]);
      team.critical_end(&names[i]);
    }
    try {
      team.critical_start(&names[kEntries]);
      ADD_FAILURE() << "no error for name " << kEntries + 1;
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("more than 512 distinct OpenMP locks"), std::string::npos) << e.what();
    }
  });
}

// adopt_rank0_contents: blocks that differ from rank 0's take its bytes (and only those: the
// count replaced says so); blocks alike everywhere are left as they are.
TEST(OmpAdoptContents, BlocksThatDifferFromRankZerosTakeItsBytes) {
  constexpr size_t kBlocks = 6;
  alignas(4096) static uint8_t range[kBlocks * loom::omp::kAdoptBlock];
  const int me = rt().rank();
  for (size_t b = 0; b < kBlocks; ++b) {
    // Blocks 1 and 4 hold this rank's own bytes; the others the same everywhere.
    const bool own = b == 1 || b == 4;
    std::memset(range + b * loom::omp::kAdoptBlock, own ? 0x10 + me : 0x5a, loom::omp::kAdoptBlock);
  }
  range[4 * loom::omp::kAdoptBlock + 17] = 0x77;  // one byte of block 4 alike: still a differing block
  const size_t replaced = loom::omp::adopt_rank0_contents(rt().bootstrap(), std::span<uint8_t>(range, sizeof range));
  EXPECT_EQ(replaced, me == 0 ? 0u : 2u);
  for (size_t b = 0; b < kBlocks; ++b) {
    const bool own = b == 1 || b == 4;
    for (size_t i = 0; i < loom::omp::kAdoptBlock; ++i) {
      const uint8_t want = b == 4 && i == 17 ? 0x77 : own ? 0x10 : 0x5a;
      ASSERT_EQ(range[b * loom::omp::kAdoptBlock + i], want) << "block " << b << " byte " << i;
    }
  }
}
