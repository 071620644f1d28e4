// loomrun -n P [--threads T] nas_loom <kernel> <class> [--policy P]: a NAS kernel on Loom's
// shared regions, processes x threads; the same kernel source as nas_omp (bench/nas/team.hpp).
// Rank 0 prints the NPB summary and the DSM counters of the timed section, summed over the
// processes; every rank exits 1 when verification failed, 2 on bad arguments.
#include <cstdio>
#include <exception>

#include "bench/nas/args.hpp"
#include "bench/nas/loom_team.hpp"

int main(int argc, char** argv) {
  using namespace loom::nas;
  RunArgs a;
  loom::coherence::Config cfg;
  try {
    a = parse_run_args(argc, argv, false);
    cfg = loom::coherence::Config::from_env();
    if (!a.policy.empty()) cfg.policy = loom::coherence::Policy::parse(a.policy);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nas_loom: %s\n", e.what());
    return 2;
  }
  loom::Runtime rt(argc, argv);
  const LoomRun run = run_on_loom(rt, *a.kernel, a.cls, cfg);
  if (rt.rank() == 0) {
    print_summary(run.result, rt.size(), rt.threads_per_process(), "loom-" + cfg.policy.name());
    std::printf(" DSM counters    =");
    for (int i = 0; i < DsmCounters::kCount; ++i) std::printf(" %s=%.0f", DsmCounters::kNames[i], run.counters.v[i]);
    std::printf("\n");
    std::fflush(stdout);
  }
  return run.result.verified ? 0 : 1;
}
