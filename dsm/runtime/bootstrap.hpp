#pragma once
// How processes of a job find each other: rank, size, and collective exchange of small blobs
// (endpoints, memory keys). The embedded implementation serves loomrun on one host; a PMIx one
// for cluster launchers plugs in behind the same interface.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::runtime {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& job_id() const = 0;
  // Every rank contributes `mine`; returns all contributions indexed by rank.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
  virtual void barrier() = 0;
};

// The embedded bootstrap of loomrun: a per-job shared-memory file with one slot per rank and a
// barrier on a futex. Also creates a one-process job when the program is started by itself.
class EmbeddedBootstrap : public Bootstrap {
 public:
  EmbeddedBootstrap();
  ~EmbeddedBootstrap() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& job_id() const override { return job_id_; }
  const std::string& job_dir() const { return job_dir_; }
  bool singleton() const { return singleton_; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;

  static constexpr size_t kSlotBytes = 64 * 1024;
  // Size of the bootstrap file for `n` ranks; loomrun creates it.
  static size_t file_size(int n);

 private:
  struct Header;
  int rank_ = 0;
  int size_ = 1;
  bool singleton_ = false;
  std::string job_id_;
  std::string job_dir_;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  Header* h_ = nullptr;
  std::byte* slots_ = nullptr;
};

// Picks PMIx when the process was started by a PMIx launcher (when compiled in), else embedded.
std::unique_ptr<Bootstrap> make_bootstrap();

}  // namespace loom::runtime
