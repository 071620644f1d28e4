#pragma once
// The command line of one kernel run, shared by nas_loom and nas_omp:
//   <kernel> <class> [--threads T] [--policy P]
// (--threads: nas_omp only, OpenMP threads; --policy: nas_loom only, a coherence policy name).
#include <string>

#include "bench/nas/kernel.hpp"

namespace loom::nas {

struct RunArgs {
  const Kernel* kernel = nullptr;
  char cls = 0;
  int threads = 1;
  std::string policy;  // empty: LOOM_COHERENCE_POLICY or the default
};

// Throws std::invalid_argument with the usage on anything it does not understand.
RunArgs parse_run_args(int argc, char** argv, bool omp);

// s as a whole decimal number in [lo, hi]; throws std::invalid_argument naming `what` otherwise.
int parse_int(const std::string& s, int lo, int hi, const std::string& what);

}  // namespace loom::nas
