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
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const std::string& job_id() const override { return job_id_; }
  const std::string& job_dir() const override { return job_dir_; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;
  void watch_peers(PeerWatch* w) override { watch_ = w; }

 private:
  void fence(bool collect, const char* what);
  PeerWatch* watch_ = nullptr;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string job_id_, job_dir_;
  int hold_ = -1;  // the shared lock on job_dir_ (job_dir.hpp)
  uint64_t round_ = 0;
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace loom::runtime
