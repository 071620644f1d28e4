// nas_omp <kernel> <class> [--threads T]: a NAS kernel as OpenMP threads of one process, the
// reference build beside nas_loom (the same kernel source, bench/nas/team.hpp). Exits 1 when
// verification failed, 2 on bad arguments.
#include <cstdio>
#include <exception>

#include "bench/nas/args.hpp"
#include "bench/nas/omp_team.hpp"

int main(int argc, char** argv) {
  using namespace loom::nas;
  RunArgs a;
  try {
    a = parse_run_args(argc, argv, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nas_omp: %s\n", e.what());
    return 2;
  }
  const Result r = run_on_omp(*a.kernel, a.cls, a.threads);
  print_summary(r, 1, a.threads, "omp");
  return r.verified ? 0 : 1;
}
