#pragma once
// Loop schedules of the OpenMP layer, as pure functions: the schedule a program asks for
// (OMP_SCHEDULE, `schedule(runtime)`), how many iterations a loop has, which iterations a thread
// takes under `static` (with or without a chunk), and how large the next `guided` chunk is. The
// layer hands out `dynamic` and `guided` chunks from one shared counter of iterations; these
// functions say what a counter value means.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::omp {

enum class ScheduleKind : uint8_t { Static, Dynamic, Guided, Auto };

struct Schedule {
  ScheduleKind kind = ScheduleKind::Static;
  int64_t chunk = 0;        // 0: the kind's default (static: one block a thread; others: 1)
  bool monotonic = false;   // the `monotonic:` modifier (dynamic and guided are nonmonotonic otherwise)
  bool operator==(const Schedule&) const = default;
};

// OMP_SCHEDULE's grammar: [modifier:]kind[,chunk] with kind static|dynamic|guided|auto, modifier
// monotonic|nonmonotonic, chunk a positive integer (case and spaces around the parts ignored).
// Anything else is an error naming `what` and the text.
Schedule parse_schedule(const std::string& text, const std::string& what = "OMP_SCHEDULE");

// OMP_NUM_THREADS: a comma-separated list of positive counts, one per nesting level.
std::vector<int> parse_num_threads(const std::string& text, const std::string& what = "OMP_NUM_THREADS");

// A loop as the compiler hands it over: start, end (exclusive) and a nonzero step of either sign.
// Iterations are numbered 0..count()-1; iteration i is start + i * step.
template <typename T>
struct LoopBounds {
  T start{}, end{}, step{};
  // The number of iterations (0 when the loop runs none). An unsigned loop's step is its
  // two's-complement bit pattern, as GOMP_loop_ull_* pass it, with `up` giving the direction.
  uint64_t count(bool up = true) const;
};

// A run of iterations [first, last) by number.
struct IterRange {
  uint64_t first = 0, last = 0;
  bool operator==(const IterRange&) const = default;
};

// `static` for thread `thread` of `threads` over `n` iterations. chunk 0: one contiguous block a
// thread, the first n % threads threads one iteration more (trip 0 only). chunk c: the
// thread's `trip`-th chunk of c iterations, round-robin. nullopt once the thread has no more.
std::optional<IterRange> static_range(uint64_t n, int threads, int thread, uint64_t chunk, uint64_t trip);

// `guided`: the next chunk when `remaining` iterations are left, for `threads` threads and a
// minimum chunk `chunk` (at least 1): remaining / threads rounded up, never below the minimum
// nor above what remains.
uint64_t guided_chunk(uint64_t remaining, int threads, uint64_t chunk);

}  // namespace loom::omp
