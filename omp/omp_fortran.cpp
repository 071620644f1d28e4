// OpenMP's Fortran entry points (what GFortran calls for `use omp_lib`): the C functions under
// Fortran's names, arguments by reference; 8-byte integer forms where omp_lib declares them.
#include <omp.h>

#include <cstdint>

#include "loom/omp/abi.hpp"

LOOM_OMP_API int32_t omp_get_num_threads_() { return omp_get_num_threads(); }
LOOM_OMP_API int32_t omp_get_thread_num_() { return omp_get_thread_num(); }
LOOM_OMP_API int32_t omp_get_max_threads_() { return omp_get_max_threads(); }
LOOM_OMP_API int32_t omp_get_num_procs_() { return omp_get_num_procs(); }
LOOM_OMP_API int32_t omp_get_thread_limit_() { return omp_get_thread_limit(); }
LOOM_OMP_API int32_t omp_in_parallel_() { return omp_in_parallel(); }
LOOM_OMP_API int32_t omp_get_level_() { return omp_get_level(); }
LOOM_OMP_API int32_t omp_get_active_level_() { return omp_get_active_level(); }
LOOM_OMP_API int32_t omp_get_team_size_(const int32_t* level) { return omp_get_team_size(*level); }
LOOM_OMP_API int32_t omp_get_team_size_8_(const int64_t* level) { return omp_get_team_size(static_cast<int>(*level)); }
LOOM_OMP_API int32_t omp_get_ancestor_thread_num_(const int32_t* level) { return omp_get_ancestor_thread_num(*level); }
LOOM_OMP_API int32_t omp_get_ancestor_thread_num_8_(const int64_t* level) {
  return omp_get_ancestor_thread_num(static_cast<int>(*level));
}
LOOM_OMP_API int32_t omp_get_dynamic_() { return omp_get_dynamic(); }
LOOM_OMP_API void omp_set_dynamic_(const int32_t* v) { omp_set_dynamic(*v); }
LOOM_OMP_API void omp_set_dynamic_8_(const int64_t* v) { omp_set_dynamic(static_cast<int>(*v)); }
LOOM_OMP_API int32_t omp_get_nested_() { return omp_get_nested(); }
LOOM_OMP_API void omp_set_nested_(const int32_t* v) { omp_set_nested(*v); }
LOOM_OMP_API void omp_set_nested_8_(const int64_t* v) { omp_set_nested(static_cast<int>(*v)); }
LOOM_OMP_API void omp_set_num_threads_(const int32_t* n) { omp_set_num_threads(*n); }
LOOM_OMP_API void omp_set_num_threads_8_(const int64_t* n) { omp_set_num_threads(static_cast<int>(*n)); }
LOOM_OMP_API int32_t omp_get_max_active_levels_() { return omp_get_max_active_levels(); }
LOOM_OMP_API void omp_set_max_active_levels_(const int32_t* n) { omp_set_max_active_levels(*n); }
LOOM_OMP_API void omp_set_max_active_levels_8_(const int64_t* n) { omp_set_max_active_levels(static_cast<int>(*n)); }
LOOM_OMP_API void omp_set_schedule_(const int32_t* kind, const int32_t* chunk) {
  omp_set_schedule(static_cast<omp_sched_t>(*kind), *chunk);
}
LOOM_OMP_API void omp_set_schedule_8_(const int32_t* kind, const int64_t* chunk) {
  omp_set_schedule(static_cast<omp_sched_t>(*kind), static_cast<int>(*chunk));
}
LOOM_OMP_API void omp_get_schedule_(int32_t* kind, int32_t* chunk) {
  omp_sched_t k;
  int c;
  omp_get_schedule(&k, &c);
  *kind = static_cast<int32_t>(k);
  *chunk = c;
}
LOOM_OMP_API void omp_get_schedule_8_(int32_t* kind, int64_t* chunk) {
  omp_sched_t k;
  int c;
  omp_get_schedule(&k, &c);
  *kind = static_cast<int32_t>(k);
  *chunk = c;
}
LOOM_OMP_API double omp_get_wtime_() { return omp_get_wtime(); }
LOOM_OMP_API double omp_get_wtick_() { return omp_get_wtick(); }
LOOM_OMP_API int32_t omp_in_final_() { return omp_in_final(); }
LOOM_OMP_API int32_t omp_is_initial_device_() { return omp_is_initial_device(); }
LOOM_OMP_API int32_t omp_get_num_devices_() { return omp_get_num_devices(); }
// GFortran passes a lock by reference to its integer(omp_lock_kind) variable: its address names
// the lock, as in C.
LOOM_OMP_API void omp_init_lock_(omp_lock_t* l) { omp_init_lock(l); }
LOOM_OMP_API void omp_destroy_lock_(omp_lock_t* l) { omp_destroy_lock(l); }
LOOM_OMP_API void omp_set_lock_(omp_lock_t* l) { omp_set_lock(l); }
LOOM_OMP_API void omp_unset_lock_(omp_lock_t* l) { omp_unset_lock(l); }
