// libgomp's sections: a construct of `count` sections is a dynamic loop of `count` iterations in
// chunks of one (Team's shared counter), iteration i being section i + 1; a thread asks for the
// next until it gets 0. The combined parallel form starts that loop in every thread of the
// region before the outlined function, which then only asks for sections.
#include <cstdint>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"

namespace loom::omp {
namespace {

LoopSpec sections_loop(unsigned count) {
  LoopSpec l;
  l.n = count;
  l.kind = ScheduleKind::Dynamic;
  l.chunk = 1;
  l.start = 1;
  l.step = 1;
  return l;
}

unsigned next_section() {
  const auto r = Team::loop_next();
  return r ? static_cast<unsigned>(Team::current_loop().value(r->first)) : 0;
}

}  // namespace
}  // namespace loom::omp

namespace lo = loom::omp;

LOOM_OMP_API unsigned GOMP_sections_start(unsigned count) {
  lo::Team::loop_start(lo::sections_loop(count));
  return lo::next_section();
}

// GCC's form for sections with task reductions or scratch memory, neither of which the layer takes.
LOOM_OMP_API unsigned GOMP_sections2_start(unsigned count, uintptr_t* reductions, void** mem) {
  if (reductions != nullptr || mem != nullptr)
    loom::fail("omp: task reductions on sections are not supported by the Loom OpenMP layer");
  return GOMP_sections_start(count);
}

LOOM_OMP_API unsigned GOMP_sections_next() { return lo::next_section(); }

LOOM_OMP_API void GOMP_parallel_sections(void (*fn)(void*), void* data, unsigned num_threads, unsigned count,
                                         unsigned /*flags*/) {
  const lo::LoopSpec loop = lo::sections_loop(count);
  lo::start_region(fn, data, num_threads, &loop);
}

LOOM_OMP_API void GOMP_sections_end() { lo::Team::barrier(); }
LOOM_OMP_API void GOMP_sections_end_nowait() {}
LOOM_OMP_API bool GOMP_sections_end_cancel() {
  lo::Team::barrier();
  return false;  // cancellation is never active
}
