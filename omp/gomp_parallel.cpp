// libgomp's entry points for regions and synchronization: parallel, barrier, single, critical,
// atomic (the compiler's fallback lock), and tasks, run at once on the encountering thread.
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"
#include "loom/omp/layer.hpp"

namespace loom::omp {
namespace {

thread_local int t_depth = 0;  // regions this thread is inside (serialized ones included)
int g_atomic_name;             // GOMP_atomic_start's critical section

}  // namespace

int region_depth() { return t_depth; }

// A critical section (or lock) named by an address, entered from any stack.
void critical_start(const void* name) {
  on_private_stack([](void* n) { layer().team().critical_start(n); }, const_cast<void*>(name));
}
void critical_end(const void* name) {
  on_private_stack([](void* n) { layer().team().critical_end(n); }, const_cast<void*>(name));
}
bool critical_try(const void* name) {
  struct Try {
    const void* name;
    bool taken;
  } t{name, false};
  on_private_stack([](void* p) {
    auto* t = static_cast<Try*>(p);
    t->taken = layer().team().critical_try(t->name);
  }, &t);
  return t.taken;
}

Layer& layer() {
  Layer* l = Layer::find();
  if (l == nullptr) fail("omp: an OpenMP call before the layer started or after it ended");
  return *l;
}

// A region: on every thread of the job when rank 0's master starts it outside any region, else
// (nested) on the encountering thread alone.
void start_region(Outlined fn, void* data, unsigned num_threads, const LoopSpec* loop) {
  Layer& l = layer();
  ++t_depth;
  try {
    if (t_depth == 1 && l.rank() == 0 && Team::current() == nullptr) {
      struct Call {
        Layer& l;
        Outlined fn;
        void* data;
        unsigned threads;
        const LoopSpec* loop;
      } call{l, fn, data, num_threads != 0 ? num_threads : requested_threads(), loop};
      on_private_stack([](void* c) {
        auto* k = static_cast<Call*>(c);
        k->l.team().parallel(k->fn, k->data, k->threads, k->loop);
      }, &call);
    } else {
      Team::run_serialized(fn, data, loop);
    }
  } catch (...) {
    --t_depth;
    throw;
  }
  --t_depth;
}

}  // namespace loom::omp

using loom::omp::layer;
using loom::omp::Team;

LOOM_OMP_API void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  (void)flags;  // proc_bind: every thread is pinned by the runtime already
  loom::omp::start_region(fn, data, num_threads, nullptr);
}

LOOM_OMP_API void GOMP_barrier() { Team::barrier(); }

// Cancellation is off (OpenMP's default, OMP_CANCELLATION unset or false; the layer refuses it
// on): `cancel` and cancellation points do nothing and report no cancellation, as libgomp's do
// then, and the construct runs to its end.
LOOM_OMP_API bool GOMP_cancel(int which, bool do_cancel) {
  (void)which, (void)do_cancel;
  return false;
}
LOOM_OMP_API bool GOMP_cancellation_point(int which) {
  (void)which;
  return false;
}
LOOM_OMP_API bool GOMP_barrier_cancel() {
  Team::barrier();
  return false;
}

LOOM_OMP_API bool GOMP_single_start() { return Team::single_start(); }

LOOM_OMP_API void GOMP_critical_start() { loom::omp::critical_start(nullptr); }
LOOM_OMP_API void GOMP_critical_end() { loom::omp::critical_end(nullptr); }
LOOM_OMP_API void GOMP_critical_name_start(void** pptr) { loom::omp::critical_start(pptr); }
LOOM_OMP_API void GOMP_critical_name_end(void** pptr) { loom::omp::critical_end(pptr); }
LOOM_OMP_API void GOMP_atomic_start() { loom::omp::critical_start(&loom::omp::g_atomic_name); }
LOOM_OMP_API void GOMP_atomic_end() { loom::omp::critical_end(&loom::omp::g_atomic_name); }

// A task runs at once on the encountering thread (an undeferred task), on its own copy of the
// arguments; taskwait and taskgroup then have nothing to wait for.
LOOM_OMP_API void GOMP_task(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
                            bool if_clause, unsigned flags, void** depend, int priority, void* detach) {
  (void)if_clause, (void)flags, (void)priority;
  if (detach != nullptr) loom::fail("omp: detachable tasks are not supported by the Loom OpenMP layer");
  (void)depend;  // run at once, in program order: every dependence is met
  if (cpyfn == nullptr && arg_size == 0) return fn(data);
  const size_t align = arg_align > 0 ? static_cast<size_t>(arg_align) : alignof(std::max_align_t);
  auto* buf = static_cast<char*>(::operator new(static_cast<size_t>(arg_size) + align));
  std::unique_ptr<char, void (*)(char*)> hold(buf, [](char* p) { ::operator delete(p); });
  void* args = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(buf) + align - 1) / align * align);
  if (cpyfn != nullptr) {
    cpyfn(args, data);
  } else {
    std::memcpy(args, data, static_cast<size_t>(arg_size));
  }
  fn(args);
}

LOOM_OMP_API void GOMP_taskwait() {}
LOOM_OMP_API void GOMP_taskyield() {}
LOOM_OMP_API void GOMP_taskgroup_start() {}
LOOM_OMP_API void GOMP_taskgroup_end() {}
