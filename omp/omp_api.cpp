// OpenMP's omp_* functions on the layer: the team is every thread of the job (processes x
// threads per process), regions nest serialized, locks are the job's critical sections.
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <unordered_map>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"

namespace loom::omp {
namespace {

unsigned g_set_threads = 0;  // omp_set_num_threads

unsigned env_threads() {
  static const unsigned n = [] {
    const char* s = std::getenv("OMP_NUM_THREADS");
    return s != nullptr ? static_cast<unsigned>(parse_num_threads(s).front()) : 0u;
  }();
  return n;
}

}  // namespace

unsigned requested_threads() { return g_set_threads != 0 ? g_set_threads : env_threads(); }

}  // namespace loom::omp

using loom::omp::layer;
using loom::omp::Team;
namespace lo = loom::omp;

LOOM_OMP_API int omp_get_num_threads() {
  Team* t = Team::current();
  return t != nullptr ? t->size() : 1;
}
LOOM_OMP_API int omp_get_thread_num() { return Team::thread_num(); }
LOOM_OMP_API int omp_get_max_threads() { return lo::region_depth() == 0 ? layer().team().size() : 1; }
LOOM_OMP_API void omp_set_num_threads(int n) {
  if (n < 1) loom::fail("omp: omp_set_num_threads(", n, ")");
  lo::g_set_threads = static_cast<unsigned>(n);
}
LOOM_OMP_API int omp_in_parallel() { return Team::current() != nullptr ? 1 : 0; }
LOOM_OMP_API int omp_get_level() { return lo::region_depth(); }
LOOM_OMP_API int omp_get_active_level() { return Team::current() != nullptr ? 1 : 0; }
LOOM_OMP_API int omp_get_team_size(int level) {
  if (level == 0) return 1;
  if (level == 1 && Team::current() != nullptr) return Team::current()->size();
  return level <= lo::region_depth() ? 1 : -1;
}
LOOM_OMP_API int omp_get_ancestor_thread_num(int level) {
  if (level == 0) return 0;
  if (level == 1 && Team::current() != nullptr) return Team::thread_num();
  return level <= lo::region_depth() ? 0 : -1;
}
LOOM_OMP_API int omp_get_num_procs() { return layer().team().size(); }
LOOM_OMP_API int omp_get_thread_limit() { return layer().team().size(); }
LOOM_OMP_API int omp_get_dynamic() { return 0; }
LOOM_OMP_API void omp_set_dynamic(int) {}
LOOM_OMP_API int omp_get_nested() { return 0; }
LOOM_OMP_API void omp_set_nested(int) {}
LOOM_OMP_API int omp_get_max_active_levels() { return 1; }
LOOM_OMP_API void omp_set_max_active_levels(int) {}
LOOM_OMP_API int omp_get_supported_active_levels() { return 1; }
LOOM_OMP_API int omp_in_final() { return 0; }
LOOM_OMP_API int omp_get_cancellation() { return 0; }
LOOM_OMP_API omp_proc_bind_t omp_get_proc_bind() { return omp_proc_bind_false; }
LOOM_OMP_API int omp_is_initial_device() { return 1; }
LOOM_OMP_API int omp_get_num_devices() { return 0; }
LOOM_OMP_API int omp_get_default_device() { return 0; }
LOOM_OMP_API void omp_set_default_device(int) {}
LOOM_OMP_API int omp_get_initial_device() { return 0; }
LOOM_OMP_API int omp_get_device_num() { return 0; }

LOOM_OMP_API void omp_set_schedule(omp_sched_t kind, int chunk) {
  lo::Schedule s;
  switch (static_cast<int>(kind) & 0x7fffffff) {
    case omp_sched_static: s.kind = lo::ScheduleKind::Static; break;
    case omp_sched_dynamic: s.kind = lo::ScheduleKind::Dynamic; break;
    case omp_sched_guided: s.kind = lo::ScheduleKind::Guided; break;
    case omp_sched_auto: s.kind = lo::ScheduleKind::Auto; break;
    default: loom::fail("omp: omp_set_schedule with schedule kind ", static_cast<int>(kind));
  }
  s.chunk = chunk > 0 ? chunk : 0;
  s.monotonic = (static_cast<unsigned>(kind) & 0x80000000u) != 0;
  layer().set_runtime_schedule(s);
}

LOOM_OMP_API void omp_get_schedule(omp_sched_t* kind, int* chunk) {
  const lo::Schedule s = layer().runtime_schedule();
  switch (s.kind) {
    case lo::ScheduleKind::Static: *kind = omp_sched_static; break;
    case lo::ScheduleKind::Dynamic: *kind = omp_sched_dynamic; break;
    case lo::ScheduleKind::Guided: *kind = omp_sched_guided; break;
    case lo::ScheduleKind::Auto: *kind = omp_sched_auto; break;
  }
  *chunk = static_cast<int>(s.chunk);
}

LOOM_OMP_API double omp_get_wtime() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
LOOM_OMP_API double omp_get_wtick() { return 1e-9; }

// Locks: the lock variable's address names a critical section of the job (the variable itself
// holds nothing), so a lock excludes every thread of every process.
LOOM_OMP_API void omp_init_lock(omp_lock_t*) {}
LOOM_OMP_API void omp_destroy_lock(omp_lock_t*) {}
LOOM_OMP_API void omp_set_lock(omp_lock_t* l) { lo::critical_start(l); }
LOOM_OMP_API void omp_unset_lock(omp_lock_t* l) { lo::critical_end(l); }
LOOM_OMP_API int omp_test_lock(omp_lock_t* l) { return lo::critical_try(l) ? 1 : 0; }

// Nestable locks: the same critical sections, with the depth its holder has taken each to kept
// by the holder (only the holder asks whether it holds one).
namespace {
thread_local std::unordered_map<const void*, int> t_nest_depth;
}  // namespace
LOOM_OMP_API void omp_init_nest_lock(omp_nest_lock_t*) {}
LOOM_OMP_API void omp_destroy_nest_lock(omp_nest_lock_t*) {}
LOOM_OMP_API void omp_set_nest_lock(omp_nest_lock_t* l) {
  int& depth = t_nest_depth[l];
  if (depth == 0) lo::critical_start(l);
  ++depth;
}
LOOM_OMP_API void omp_unset_nest_lock(omp_nest_lock_t* l) {
  auto it = t_nest_depth.find(l);
  if (it == t_nest_depth.end() || it->second == 0) loom::fail("omp: omp_unset_nest_lock of a lock this thread does not hold");
  if (--it->second == 0) {
    t_nest_depth.erase(it);
    lo::critical_end(l);
  }
}
LOOM_OMP_API int omp_test_nest_lock(omp_nest_lock_t* l) {
  int& depth = t_nest_depth[l];
  if (depth == 0 && !lo::critical_try(l)) {
    t_nest_depth.erase(l);
    return 0;
  }
  return ++depth;
}
