// libgomp's worksharing loops: start / next / end for every schedule, the combined parallel
// loops, and the unsigned (ull) forms. A loop's chunks are iteration numbers (Team); these
// functions translate them to the compiler's bounds.
#include <cstdint>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"

namespace loom::omp {
namespace {

// libgomp's schedule numbers (GOMP_loop_start's `sched`), the monotonic flag aside.
constexpr long kRuntime = 0, kStatic = 1, kDynamic = 2, kGuided = 3, kAuto = 4;
constexpr unsigned long kMonotonic = 0x80000000UL;

LoopSpec signed_loop(long start, long end, long incr, ScheduleKind kind, long chunk) {
  LoopSpec l;
  l.n = LoopBounds<int64_t>{start, end, incr}.count();
  l.kind = kind;
  l.chunk = chunk > 0 ? static_cast<uint64_t>(chunk) : 0;
  l.start = static_cast<uint64_t>(start);
  l.step = static_cast<uint64_t>(incr);
  return l;
}

LoopSpec unsigned_loop(bool up, unsigned long long start, unsigned long long end, unsigned long long incr,
                       ScheduleKind kind, unsigned long long chunk) {
  LoopSpec l;
  l.n = LoopBounds<uint64_t>{start, end, incr}.count(up);
  l.kind = kind;
  l.chunk = chunk;
  l.start = start;
  l.step = incr;
  return l;
}

// `schedule(runtime)`: the layer's run-time schedule (OMP_SCHEDULE, omp_set_schedule).
LoopSpec with_runtime_schedule(LoopSpec l) {
  const Schedule s = layer().runtime_schedule();
  l.kind = s.kind;
  l.chunk = static_cast<uint64_t>(s.chunk);
  return l;
}

// GOMP_loop_start's schedule number (and what it cannot take: task reductions, and scratch
// memory for lastprivate(conditional:) or inscan) applied to a loop.
LoopSpec scheduled(LoopSpec l, long sched, uintptr_t* reductions, void** mem) {
  if (reductions != nullptr || mem != nullptr)
    fail("omp: task reductions and lastprivate(conditional:) on a loop are not supported by the Loom OpenMP layer");
  switch (static_cast<long>(static_cast<unsigned long>(sched) & ~kMonotonic)) {
    case kStatic: l.kind = ScheduleKind::Static; return l;
    case kDynamic: l.kind = ScheduleKind::Dynamic; return l;
    case kGuided: l.kind = ScheduleKind::Guided; return l;
    case kAuto: l.kind = ScheduleKind::Auto; return l;
    case kRuntime: return with_runtime_schedule(l);
  }
  fail("omp: schedule ", sched, " from the compiler is not one this layer knows");
}

template <typename T>
bool next_bounds(T* istart, T* iend) {
  auto r = Team::loop_next();
  if (!r) return false;
  const LoopSpec& l = Team::current_loop();
  *istart = static_cast<T>(l.value(r->first));
  *iend = static_cast<T>(l.value(r->last));
  return true;
}

template <typename T>
bool start_loop(const LoopSpec& l, T* istart, T* iend) {
  Team::loop_start(l);
  return next_bounds(istart, iend);
}

template <typename T>
bool start_ordered_loop(const LoopSpec& l, T* istart, T* iend) {
  Team::loop_start_ordered(l);
  return next_bounds(istart, iend);
}

}  // namespace
}  // namespace loom::omp

using loom::omp::LoopSpec;
using loom::omp::ScheduleKind;
using loom::omp::Team;
namespace lo = loom::omp;

// ---- long loops ---------------------------------------------------------------------------

#define LOOM_OMP_LOOP(NAME, KIND)                                                                                    \
  LOOM_OMP_API bool GOMP_loop_##NAME##_start(long start, long end, long incr, long chunk, long* istart, long* iend) { \
    return lo::start_loop(lo::signed_loop(start, end, incr, KIND, chunk), istart, iend);                             \
  }                                                                                                                  \
  LOOM_OMP_API bool GOMP_loop_##NAME##_next(long* istart, long* iend) { return lo::next_bounds(istart, iend); }      \
  LOOM_OMP_API void GOMP_parallel_loop_##NAME(void (*fn)(void*), void* data, unsigned num_threads, long start,      \
                                              long end, long incr, long chunk, unsigned flags) {                     \
    (void)flags;                                                                                                     \
    const LoopSpec l = lo::signed_loop(start, end, incr, KIND, chunk);                                               \
    lo::start_region(fn, data, num_threads, &l);                                                                     \
  }

LOOM_OMP_LOOP(static, ScheduleKind::Static)
LOOM_OMP_LOOP(dynamic, ScheduleKind::Dynamic)
LOOM_OMP_LOOP(guided, ScheduleKind::Guided)
LOOM_OMP_LOOP(nonmonotonic_dynamic, ScheduleKind::Dynamic)
LOOM_OMP_LOOP(nonmonotonic_guided, ScheduleKind::Guided)

#define LOOM_OMP_RUNTIME_LOOP(NAME)                                                                                 \
  LOOM_OMP_API bool GOMP_loop_##NAME##_start(long start, long end, long incr, long* istart, long* iend) {           \
    return lo::start_loop(lo::with_runtime_schedule(lo::signed_loop(start, end, incr, ScheduleKind::Static, 0)),    \
                          istart, iend);                                                                             \
  }                                                                                                                  \
  LOOM_OMP_API bool GOMP_loop_##NAME##_next(long* istart, long* iend) { return lo::next_bounds(istart, iend); }      \
  LOOM_OMP_API void GOMP_parallel_loop_##NAME(void (*fn)(void*), void* data, unsigned num_threads, long start,      \
                                              long end, long incr, unsigned flags) {                                 \
    (void)flags;                                                                                                     \
    const LoopSpec l = lo::with_runtime_schedule(lo::signed_loop(start, end, incr, ScheduleKind::Static, 0));       \
    lo::start_region(fn, data, num_threads, &l);                                                                     \
  }

LOOM_OMP_RUNTIME_LOOP(runtime)
LOOM_OMP_RUNTIME_LOOP(nonmonotonic_runtime)
LOOM_OMP_RUNTIME_LOOP(maybe_nonmonotonic_runtime)

// GCC 9's generic start; a null istart only sets the loop up.
LOOM_OMP_API bool GOMP_loop_start(long start, long end, long incr, long sched, long chunk, long* istart, long* iend,
                                  uintptr_t* reductions, void** mem) {
  Team::loop_start(lo::scheduled(lo::signed_loop(start, end, incr, ScheduleKind::Static, chunk), sched, reductions, mem));
  return istart == nullptr || lo::next_bounds(istart, iend);
}

// Loops with `ordered` sections (GOMP_ordered_start in their bodies).
#define LOOM_OMP_ORDERED_LOOP(NAME, KIND)                                                                            \
  LOOM_OMP_API bool GOMP_loop_ordered_##NAME##_start(long start, long end, long incr, long chunk, long* istart,      \
                                                     long* iend) {                                                   \
    return lo::start_ordered_loop(lo::signed_loop(start, end, incr, KIND, chunk), istart, iend);                     \
  }                                                                                                                  \
  LOOM_OMP_API bool GOMP_loop_ordered_##NAME##_next(long* istart, long* iend) { return lo::next_bounds(istart, iend); }

LOOM_OMP_ORDERED_LOOP(static, ScheduleKind::Static)
LOOM_OMP_ORDERED_LOOP(dynamic, ScheduleKind::Dynamic)
LOOM_OMP_ORDERED_LOOP(guided, ScheduleKind::Guided)

LOOM_OMP_API bool GOMP_loop_ordered_runtime_start(long start, long end, long incr, long* istart, long* iend) {
  return lo::start_ordered_loop(lo::with_runtime_schedule(lo::signed_loop(start, end, incr, ScheduleKind::Static, 0)),
                                istart, iend);
}
LOOM_OMP_API bool GOMP_loop_ordered_runtime_next(long* istart, long* iend) { return lo::next_bounds(istart, iend); }

LOOM_OMP_API bool GOMP_loop_ordered_start(long start, long end, long incr, long sched, long chunk, long* istart,
                                          long* iend, uintptr_t* reductions, void** mem) {
  Team::loop_start_ordered(lo::scheduled(lo::signed_loop(start, end, incr, ScheduleKind::Static, chunk), sched, reductions, mem));
  return istart == nullptr || lo::next_bounds(istart, iend);
}

LOOM_OMP_API void GOMP_ordered_start() { Team::ordered_start(); }
LOOM_OMP_API void GOMP_ordered_end() {}  // the turn passes when the chunk ends

LOOM_OMP_API void GOMP_loop_end() { Team::barrier(); }
LOOM_OMP_API void GOMP_loop_end_nowait() {}
LOOM_OMP_API bool GOMP_loop_end_cancel() {
  Team::barrier();
  return false;  // cancellation is never active
}

// ---- unsigned long long loops -------------------------------------------------------------

using ull = unsigned long long;

#define LOOM_OMP_ULL_LOOP(NAME, KIND)                                                                                \
  LOOM_OMP_API bool GOMP_loop_ull_##NAME##_start(bool up, ull start, ull end, ull incr, ull chunk, ull* istart,      \
                                                 ull* iend) {                                                        \
    return lo::start_loop(lo::unsigned_loop(up, start, end, incr, KIND, chunk), istart, iend);                       \
  }                                                                                                                  \
  LOOM_OMP_API bool GOMP_loop_ull_##NAME##_next(ull* istart, ull* iend) { return lo::next_bounds(istart, iend); }

LOOM_OMP_ULL_LOOP(static, ScheduleKind::Static)
LOOM_OMP_ULL_LOOP(dynamic, ScheduleKind::Dynamic)
LOOM_OMP_ULL_LOOP(guided, ScheduleKind::Guided)
LOOM_OMP_ULL_LOOP(nonmonotonic_dynamic, ScheduleKind::Dynamic)
LOOM_OMP_ULL_LOOP(nonmonotonic_guided, ScheduleKind::Guided)

#define LOOM_OMP_ULL_RUNTIME_LOOP(NAME)                                                                             \
  LOOM_OMP_API bool GOMP_loop_ull_##NAME##_start(bool up, ull start, ull end, ull incr, ull* istart, ull* iend) {    \
    return lo::start_loop(lo::with_runtime_schedule(lo::unsigned_loop(up, start, end, incr, ScheduleKind::Static, 0)), \
                          istart, iend);                                                                             \
  }                                                                                                                  \
  LOOM_OMP_API bool GOMP_loop_ull_##NAME##_next(ull* istart, ull* iend) { return lo::next_bounds(istart, iend); }

LOOM_OMP_ULL_RUNTIME_LOOP(runtime)
LOOM_OMP_ULL_RUNTIME_LOOP(nonmonotonic_runtime)
LOOM_OMP_ULL_RUNTIME_LOOP(maybe_nonmonotonic_runtime)

LOOM_OMP_API bool GOMP_loop_ull_start(bool up, ull start, ull end, ull incr, long sched, ull chunk, ull* istart,
                                      ull* iend, uintptr_t* reductions, void** mem) {
  Team::loop_start(lo::scheduled(lo::unsigned_loop(up, start, end, incr, ScheduleKind::Static, chunk), sched, reductions, mem));
  return istart == nullptr || lo::next_bounds(istart, iend);
}

#define LOOM_OMP_ULL_ORDERED_LOOP(NAME, KIND)                                                                        \
  LOOM_OMP_API bool GOMP_loop_ull_ordered_##NAME##_start(bool up, ull start, ull end, ull incr, ull chunk,          \
                                                         ull* istart, ull* iend) {                                   \
    return lo::start_ordered_loop(lo::unsigned_loop(up, start, end, incr, KIND, chunk), istart, iend);               \
  }                                                                                                                  \
  LOOM_OMP_API bool GOMP_loop_ull_ordered_##NAME##_next(ull* istart, ull* iend) { return lo::next_bounds(istart, iend); }

LOOM_OMP_ULL_ORDERED_LOOP(static, ScheduleKind::Static)
LOOM_OMP_ULL_ORDERED_LOOP(dynamic, ScheduleKind::Dynamic)
LOOM_OMP_ULL_ORDERED_LOOP(guided, ScheduleKind::Guided)

LOOM_OMP_API bool GOMP_loop_ull_ordered_runtime_start(bool up, ull start, ull end, ull incr, ull* istart, ull* iend) {
  return lo::start_ordered_loop(
      lo::with_runtime_schedule(lo::unsigned_loop(up, start, end, incr, ScheduleKind::Static, 0)), istart, iend);
}
LOOM_OMP_API bool GOMP_loop_ull_ordered_runtime_next(ull* istart, ull* iend) { return lo::next_bounds(istart, iend); }

LOOM_OMP_API bool GOMP_loop_ull_ordered_start(bool up, ull start, ull end, ull incr, long sched, ull chunk,
                                              ull* istart, ull* iend, uintptr_t* reductions, void** mem) {
  Team::loop_start_ordered(
      lo::scheduled(lo::unsigned_loop(up, start, end, incr, ScheduleKind::Static, chunk), sched, reductions, mem));
  return istart == nullptr || lo::next_bounds(istart, iend);
}
