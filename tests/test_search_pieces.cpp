// The search's pieces (mcts_shared_tree/), single process: the worker pool that keeps a
// search's threads from search to search, and the node arena that keeps its memory.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "loom/mcts_shared_tree/local_tree.hpp"
#include "loom/mcts_shared_tree/worker_pool.hpp"

using loom::mcts::Arena;
using loom::mcts::WorkerPool;

namespace {

TEST(WorkerPool, EveryRunRunsTheJobOnceOnEveryWorkerAndItsWritesAreSeenAfter) {
  WorkerPool pool(4, WorkerPool::any_core());
  ASSERT_EQ(pool.workers(), 4);
  std::vector<int> hits(4, 0);  // plain ints: run's return orders the workers' writes before our reads
  for (int run = 1; run <= 300; ++run) {
    pool.run([&](int w) { hits[static_cast<size_t>(w)] += 1; });
    for (int w = 0; w < 4; ++w) ASSERT_EQ(hits[static_cast<size_t>(w)], run) << "worker " << w;
  }
}

TEST(WorkerPool, ARunCountsItsWorkersCpuTime) {
  WorkerPool pool(2, WorkerPool::any_core());
  auto cpu_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
  };
  pool.run([&](int) {  // each worker runs until it has had 5 ms more CPU
    for (const uint64_t t0 = cpu_ns(); cpu_ns() - t0 < 5'000'000u;) {
    }
  });
  EXPECT_GE(pool.last_run_cpu_ns(), 2 * 5'000'000u);
  pool.run([](int) {});
  EXPECT_LT(pool.last_run_cpu_ns(), 5'000'000u) << "each run counts its own time";
}

TEST(WorkerPool, TheSameThreadsServeEveryRun) {
  std::atomic<int> spawned{0};
  WorkerPool pool(3, [&](int, std::function<void()> body) {
    spawned.fetch_add(1);
    return std::thread(std::move(body));
  });
  std::vector<std::thread::id> first(3), now(3);
  pool.run([&](int w) { first[static_cast<size_t>(w)] = std::this_thread::get_id(); });
  EXPECT_EQ(first[0], std::this_thread::get_id());  // worker 0 is the caller
  for (int run = 0; run < 50; ++run) {
    pool.run([&](int w) { now[static_cast<size_t>(w)] = std::this_thread::get_id(); });
    EXPECT_EQ(now, first);
  }
  EXPECT_EQ(spawned.load(), 2);
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 3u);
}

TEST(WorkerPool, OneWorkerIsTheCallerAlone) {
  WorkerPool pool(1, [](int, std::function<void()>) -> std::thread { throw std::logic_error("no thread expected"); });
  int ran = 0;
  pool.run([&](int w) { ran += w == 0 ? 1 : 100; });
  EXPECT_EQ(ran, 1);
}

TEST(WorkerPool, WorkersLeftIdleForLongWakeForTheNextRun) {
  WorkerPool pool(2, WorkerPool::any_core());
  std::atomic<int> runs{0};
  pool.run([&](int) { runs.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past spinning and yielding: asleep on the futex
  pool.run([&](int) { runs.fetch_add(1); });
  EXPECT_EQ(runs.load(), 4);
}

TEST(Arena, RewindHandsOutTheSameMemoryAgainAndLargeNodesGetTheirOwnChunk) {
  Arena a;
  uint8_t* first = a.allocate(24);
  uint8_t* second = a.allocate(40);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 16, 0u);
  EXPECT_EQ(second, first + 32);  // rounded to 16 bytes
  uint8_t* big = a.allocate(size_t{5} << 20);  // over a chunk: a chunk of its own
  std::memset(big, 1, size_t{5} << 20);
  const size_t bytes = a.bytes();
  a.rewind();
  EXPECT_EQ(a.allocate(24), first);
  EXPECT_EQ(a.allocate(size_t{5} << 20), big);  // skips the first chunk's rest, reuses the big one
  EXPECT_EQ(a.bytes(), bytes);                  // nothing new was allocated
}

}  // namespace
