// The OpenMP layer's pure pieces (omp/schedule.hpp): schedule and thread-count settings, loop
// iteration counts, static blocks and chunks (every iteration exactly once), guided chunks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/program_data.hpp"
#include "loom/omp/schedule.hpp"

using loom::omp::PageRange;
using loom::omp::guided_chunk;
using loom::omp::IterRange;
using loom::omp::LoopBounds;
using loom::omp::parse_num_threads;
using loom::omp::parse_schedule;
using loom::omp::Schedule;
using loom::omp::ScheduleKind;
using loom::omp::static_range;

TEST(OmpSettings, SchedulesParse) {
  EXPECT_EQ(parse_schedule("static"), (Schedule{ScheduleKind::Static, 0, false}));
  EXPECT_EQ(parse_schedule(" Dynamic , 4 "), (Schedule{ScheduleKind::Dynamic, 4, false}));
  EXPECT_EQ(parse_schedule("monotonic:guided,16"), (Schedule{ScheduleKind::Guided, 16, true}));
  EXPECT_EQ(parse_schedule("nonmonotonic:dynamic"), (Schedule{ScheduleKind::Dynamic, 0, false}));
  EXPECT_EQ(parse_schedule("AUTO"), (Schedule{ScheduleKind::Auto, 0, false}));
}

TEST(OmpSettings, BadSchedulesAreClearErrors) {
  for (const char* bad : {"", "fast", "static,0", "static,-2", "dynamic,x", "dynamic,", "sometimes:static", "auto,4",
                          "static,99999999999999999999"}) {
    try {
      parse_schedule(bad);
      FAIL() << "no error for '" << bad << "'";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("OMP_SCHEDULE"), std::string::npos) << e.what();
    }
  }
}

TEST(OmpSettings, ThreadCountsParse) {
  EXPECT_EQ(parse_num_threads("4"), std::vector<int>{4});
  EXPECT_EQ(parse_num_threads("8, 2"), (std::vector<int>{8, 2}));
  for (const char* bad : {"", "0", "-1", "4,", "two", "4,,2"}) EXPECT_THROW(parse_num_threads(bad), loom::Error) << bad;
}

TEST(OmpLoops, IterationCounts) {
  EXPECT_EQ((LoopBounds<int64_t>{0, 10, 1}.count()), 10u);
  EXPECT_EQ((LoopBounds<int64_t>{0, 10, 3}.count()), 4u);   // 0 3 6 9
  EXPECT_EQ((LoopBounds<int64_t>{10, 0, -3}.count()), 4u);  // 10 7 4 1
  EXPECT_EQ((LoopBounds<int64_t>{5, 5, 1}.count()), 0u);
  EXPECT_EQ((LoopBounds<int64_t>{5, 0, 1}.count()), 0u);
  EXPECT_EQ((LoopBounds<int64_t>{INT64_MIN, INT64_MAX, 1}.count()), UINT64_MAX);
  EXPECT_EQ((LoopBounds<uint64_t>{0, 10, 4}.count(true)), 3u);
  EXPECT_EQ((LoopBounds<uint64_t>{10, 0, static_cast<uint64_t>(-2)}.count(false)), 5u);  // 10 8 6 4 2
  EXPECT_EQ((LoopBounds<uint64_t>{0, 10, static_cast<uint64_t>(-2)}.count(false)), 0u);
  EXPECT_THROW((LoopBounds<int64_t>{0, 10, 0}.count()), loom::Error);
}

// Every iteration goes to exactly one thread, for blocks and for chunks; blocks are as libgomp
// makes them (the first n % threads threads take one more).
TEST(OmpLoops, StaticCoversEveryIterationOnce) {
  for (uint64_t n : {0u, 1u, 7u, 64u, 1000u})
    for (int threads : {1, 3, 8})
      for (uint64_t chunk : {0u, 1u, 5u, 64u}) {
        std::vector<int> seen(n, 0);
        for (int t = 0; t < threads; ++t)
          for (uint64_t trip = 0;; ++trip) {
            auto r = static_range(n, threads, t, chunk, trip);
            if (!r) break;
            ASSERT_LT(r->first, r->last);
            for (uint64_t i = r->first; i < r->last; ++i) ++seen[i];
          }
        for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n " << n << " threads " << threads << " chunk " << chunk << " i " << i;
      }
  EXPECT_EQ(static_range(10, 4, 0, 0, 0), (IterRange{0, 3}));
  EXPECT_EQ(static_range(10, 4, 1, 0, 0), (IterRange{3, 6}));
  EXPECT_EQ(static_range(10, 4, 2, 0, 0), (IterRange{6, 8}));
  EXPECT_EQ(static_range(10, 4, 3, 0, 0), (IterRange{8, 10}));
  EXPECT_FALSE(static_range(10, 4, 1, 2, 1));                       // chunk 5 would start at 10
  EXPECT_EQ(static_range(20, 4, 1, 2, 1), (IterRange{10, 12}));  // chunk 5 of 2 iterations
  EXPECT_FALSE(static_range(3, 4, 3, 0, 0));                        // nothing left for thread 3
  EXPECT_THROW(static_range(10, 4, 4, 0, 0), loom::Error);
}

TEST(OmpLoops, GuidedChunksShrinkToTheMinimum) {
  EXPECT_EQ(guided_chunk(100, 4, 1), 25u);
  EXPECT_EQ(guided_chunk(75, 4, 1), 19u);
  EXPECT_EQ(guided_chunk(3, 4, 1), 1u);
  EXPECT_EQ(guided_chunk(30, 4, 10), 10u);
  EXPECT_EQ(guided_chunk(6, 4, 10), 6u);  // never above what remains
  EXPECT_EQ(guided_chunk(0, 4, 1), 0u);
  uint64_t left = 1000, chunks = 0;
  while (left > 0) {
    uint64_t c = guided_chunk(left, 8, 4);
    ASSERT_GT(c, 0u);
    left -= c;
    ++chunks;
  }
  EXPECT_LT(chunks, 1000u / 4);
}

namespace {

ElfW(Phdr) header(uint32_t type, uint32_t flags, uint64_t vaddr, uint64_t memsz) {
  ElfW(Phdr) h{};
  h.p_type = type;
  h.p_flags = flags;
  h.p_vaddr = vaddr;
  h.p_memsz = memsz;
  return h;
}

int g_initialized_global = 7;
int g_zeroed_global[100];

}  // namespace

// The layout the toolchain makes with -z now: RELRO up to a page boundary, then .data and .bss.
TEST(OmpProgramData, TheWritableSegmentLessRelroInWholePages) {
  std::vector<ElfW(Phdr)> ph = {header(PT_LOAD, PF_R | PF_X, 0x1000, 0x1d9), header(PT_LOAD, PF_R | PF_W, 0x3d80, 0x1260),
                                header(PT_GNU_RELRO, PF_R, 0x3d80, 0x280)};
  EXPECT_EQ(loom::omp::writable_data(ph, 0x555555554000, 4096), (PageRange{0x555555558000, 0x555555559000}));
  // No RELRO: from the segment's first page.
  ph.pop_back();
  EXPECT_EQ(loom::omp::writable_data(ph, 0, 4096), (PageRange{0x3000, 0x5000}));
  // Everything read-only after relocation, two writable segments, none: nothing to share.
  EXPECT_FALSE(loom::omp::writable_data(std::vector<ElfW(Phdr)>{header(PT_LOAD, PF_R | PF_W, 0x3000, 0x1000),
                                                                 header(PT_GNU_RELRO, PF_R, 0x3000, 0x1000)},
                                        0, 4096));
  EXPECT_FALSE(loom::omp::writable_data(std::vector<ElfW(Phdr)>{header(PT_LOAD, PF_R | PF_W, 0x3000, 0x100),
                                                                 header(PT_LOAD, PF_R | PF_W, 0x9000, 0x100)},
                                        0, 4096));
  EXPECT_FALSE(loom::omp::writable_data(std::vector<ElfW(Phdr)>{header(PT_LOAD, PF_R, 0x1000, 0x100)}, 0, 4096));
}

TEST(OmpProgramData, TheRunningProgramsGlobalsAreInside) {
  auto r = loom::omp::program_data();
  ASSERT_TRUE(r);
  auto inside = [&](const void* p) { return reinterpret_cast<uintptr_t>(p) >= r->start && reinterpret_cast<uintptr_t>(p) < r->end; };
  EXPECT_TRUE(inside(&g_initialized_global));
  EXPECT_TRUE(inside(&g_zeroed_global[99]));
  EXPECT_FALSE(inside(&r));  // the stack
  EXPECT_EQ(r->start % 4096, 0u);
  EXPECT_EQ(r->end % 4096, 0u);
}
