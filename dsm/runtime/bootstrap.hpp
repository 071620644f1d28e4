#pragma once
// How processes of a job find each other: rank, size, and collective exchange of small blobs
// (endpoints, memory keys). The embedded implementation serves loomrun on one host; a PMIx one
// for cluster launchers plugs in behind the same interface.
#include <cstddef>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime {

class PeerWatch;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual const char* kind() const = 0;  // "embedded", "rendezvous" or "pmix"
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among this job's processes on this host
  int local_size() const { return local_size_; }
  const std::string& job_id() const { return job_id_; }
  // A per-job directory on this host for named shared-memory segments (shm provider).
  const std::string& job_dir() const { return job_dir_; }
  // Every rank contributes `mine`; returns all contributions indexed by rank.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
  virtual void barrier() = 0;
  // Once the Runtime knows its peers: the bootstrap's waits ask `w` whether they can still take
  // part (nullptr: no more). The embedded bootstrap watches its peers through its own file.
  virtual void watch_peers(PeerWatch* w) { (void)w; }
  // Each process's current collective call as one word (Collectives::ticket_of), shown to the
  // others where the bootstrap can (the embedded bootstrap's file: the ranks of one host), so
  // that a wait that lasts can compare its own call with the peer's. 0: not known here.
  virtual void post_collective(uint64_t ticket) { (void)ticket; }
  virtual uint64_t posted_collective(int rank) const {
    (void)rank;
    return 0;
  }
  // What the bootstrap's own waits run between sleeps (the Runtime's check of the posted calls).
  void on_long_wait(std::function<void()> check) { long_wait_check_ = std::move(check); }

  // allgather of one fixed-size value per rank (addresses, keys, flags). The bytes come from
  // other processes: a contribution of another size is an error naming the rank.
  template <typename T>
  std::vector<T> allgather_value(const T& mine) {
    static_assert(std::is_trivially_copyable_v<T>);
    auto all = allgather(std::as_bytes(std::span(&mine, 1)));
    std::vector<T> out(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size() != sizeof(T)) fail("allgather: rank ", r, " sent ", all[r].size(), " bytes where ", sizeof(T), " were due");
      std::memcpy(&out[r], all[r].data(), sizeof(T));
    }
    return out;
  }

 protected:
  // The job's identity, set by each bootstrap's constructor from what its launcher says.
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string job_id_;
  std::string job_dir_;
  int hold_ = -1;  // the shared lock on job_dir_ (job_dir.hpp)
  std::function<void()> long_wait_check_;
};

// The embedded bootstrap of loomrun: a per-job shared-memory file with one slot per rank and a
// barrier on a futex. Also creates a one-process job when the program is started by itself.
class EmbeddedBootstrap : public Bootstrap {
 public:
  EmbeddedBootstrap();
  ~EmbeddedBootstrap() override;
  const char* kind() const override { return "embedded"; }
  void post_collective(uint64_t ticket) override;
  uint64_t posted_collective(int rank) const override;
  bool singleton() const { return singleton_; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;

  static constexpr size_t kSlotBytes = 64 * 1024;
  // Size of the bootstrap file for `n` ranks; loomrun creates it.
  static size_t file_size(int n);

 protected:
  struct Header;
  void check_peers() const;
  // The barrier of this host's ranks only (the single-host barrier when the job has one host).
  void local_barrier();
  // Waits (spin, yield, futex) while `word` in the file holds `value`, looking at the peers
  // between sleeps.
  void wait_while(const std::atomic<uint32_t>& word, uint32_t value) const;
  Header* header() const { return h_; }
  std::byte* slot(int rank) const { return slots_ + kSlotBytes * static_cast<size_t>(rank); }
  std::atomic<uint64_t>* lengths() const;
  bool singleton_ = false;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  Header* h_ = nullptr;
  std::byte* slots_ = nullptr;
};

// The bootstrap of a job over several nodes (loomrun --hosts, or the rendezvous form): the
// embedded bootstrap's file among the ranks of each node, and between nodes the node leader
// (local rank 0) and its launcher, which meets the other nodes' launchers at the rendezvous.
// A fence gathers the node's ranks on the file, the leader sends the node's part up and writes
// the other nodes' parts into the file, then releases them.
class RendezvousBootstrap : public EmbeddedBootstrap {
 public:
  RendezvousBootstrap();
  ~RendezvousBootstrap() override;
  const char* kind() const override { return "rendezvous"; }
  int node() const { return node_; }
  int nodes() const { return nodes_; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;

 private:
  enum class FenceKind : uint8_t { Barrier = 1, Allgather = 2 };
  // Every rank of the job reaches it; the leader exchanges `kind` fences with the other nodes
  // (for an allgather round, this node's slots go up and the others' come down).
  void fence(FenceKind kind);
  std::vector<std::byte> node_part(FenceKind kind) const;
  void take_parts(FenceKind kind, std::span<const std::byte> down);
  void leader_wait_for_arrivals();
  int node_ = 0;
  int nodes_ = 1;
  int first_rank_ = 0;  // the node's ranks are first_rank_ .. first_rank_ + local_size_ - 1
  int uplink_ = -1;     // the leader's link to its launcher
  uint64_t seq_ = 0;
};

// LOOM_BOOTSTRAP=embedded|rendezvous|pmix, else: loomrun's variables -> embedded (rendezvous
// for a job over several nodes); a PMIx launcher's (PMIX_RANK) -> PMIx when compiled in;
// neither -> a job of one.
std::unique_ptr<Bootstrap> make_bootstrap();

}  // namespace loom::runtime
