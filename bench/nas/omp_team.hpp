#pragma once
// The OpenMP back end of the team (team.hpp): the reference build, a kernel's members the
// OpenMP threads of this process (or, in nas_loomp, of the job on Loom's OpenMP layer), its
// shared arrays malloc's.
#include "bench/nas/kernel.hpp"

namespace loom::nas {

// The kernel at the class on `threads` OpenMP threads; the result as thread 0 saw it. Throws
// std::invalid_argument on a bad class; a thread's exception ends the process with its message.
Result run_on_omp(const Kernel& kernel, char cls, int threads);

}  // namespace loom::nas
