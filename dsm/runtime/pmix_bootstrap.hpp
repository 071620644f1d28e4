#pragma once
// The PMIx bootstrap (built where PMIx is: LOOM_HAVE_PMIX); make_bootstrap() picks it.
#include <memory>
#include <string>

#include "loom/dsm/runtime/bootstrap.hpp"

namespace loom::runtime {

// PMIx: ranks, sizes and blobs from the launcher's PMIx server (Open MPI's mpirun, Slurm's
// srun --mpi=pmix): put/commit/fence/get. The shm job directory is created by each host's
// local rank 0 and removed at the end; a job that crashed leaves it to the next job's sweep
// (job_dir.hpp).
class PmixBootstrap : public Bootstrap {
 public:
  PmixBootstrap();
  ~PmixBootstrap() override;
  const char* kind() const override { return "pmix"; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;
  void watch_peers(PeerWatch* w) override { watch_ = w; }

 private:
  void fence(bool collect, const char* what);
  PeerWatch* watch_ = nullptr;
  uint64_t round_ = 0;
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace loom::runtime
