#pragma once
// The process runtime (seed 000's DSfabric): bootstraps the job, names machines, processes and
// long-lived threads, pins threads with hwloc, owns the provider, the per-zone registered
// allocators and the service thread.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/memory/registered_heap.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"
#include "loom/dsm/runtime/collectives.hpp"
#include "loom/dsm/runtime/job_layout.hpp"
#include "loom/dsm/runtime/mailbox.hpp"
#include "loom/dsm/runtime/peer_watch.hpp"
#include "loom/dsm/runtime/placement.hpp"
#include "loom/dsm/runtime/service.hpp"
#include "loom/dsm/signal/offload/offloader.hpp"
#include "loom/dsm/signal/transmitter.hpp"

namespace loom {

// Where a thread is: machine (host), process (rank) and thread index within the process.
struct ThreadName {
  int machine = 0;
  int process = 0;
  int thread = 0;
  std::string label;
  std::string str() const;
};

// The calling thread's name (index 0 is the main thread of the process).
const ThreadName& this_thread_name();

// A full mesh of connected queue pairs: `ways` of them to every rank (self included;
// LOOM_QPS_PER_PEER), each with its own send CQ and Transmitter; receives of all of them land in
// one receive CQ. A thread posts to a rank on one way, the same for all its posts: threads take
// ways round-robin in the order they first ask (way_of_this_thread), so a thread's requests to a
// peer stay in one queue pair's order, and requests of different threads are ordered only by
// what the threads themselves wait for (completions, flush tags).
// Destruction is collective, like construction: it flushes this thread's posts and waits for
// every rank before the QPs go, because on RC transports a peer's in-flight requests need this
// side's QP until they are acknowledged.
struct Mesh {
  explicit Mesh(runtime::Bootstrap& b) : boot(&b) {}
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;
  runtime::Bootstrap* boot;
  int ranks = 0;
  int ways = 1;
  // Declaration order is destruction order reversed: CQs outlive the QPs that use them, QPs
  // outlive their Transmitters. Entry way * ranks + rank.
  std::unique_ptr<fabric::CompletionQueue> recv_cq;
  std::vector<std::unique_ptr<fabric::CompletionQueue>> send_cqs;
  std::vector<std::unique_ptr<fabric::QueuePair>> qps;
  std::vector<std::unique_ptr<signal::Transmitter>> transmitters;
  fabric::QueuePair& qp(int rank) { return qp(rank, way_of_this_thread()); }
  fabric::QueuePair& qp(int rank, int way) { return *qps[entry(rank, way)]; }
  signal::Transmitter& tx(int rank) { return tx(rank, way_of_this_thread()); }
  signal::Transmitter& tx(int rank, int way) { return *transmitters[entry(rank, way)]; }
  // This thread's way: the process's threads numbered in the order they first ask, modulo ways.
  int way_of_this_thread() const { return ways == 1 ? 0 : static_cast<int>(thread_number() % static_cast<uint32_t>(ways)); }
  static uint32_t thread_number();

 private:
  size_t entry(int rank, int way) const {
    if (rank < 0 || rank >= ranks) fail("mesh: rank ", rank, " is not a rank of the job (0..", ranks - 1, ")");
    if (way < 0 || way >= ways) fail("mesh: way ", way, " is not one of its ", ways, " queue pairs per peer");
    return static_cast<size_t>(way) * static_cast<size_t>(ranks) + static_cast<size_t>(rank);
  }
};

class Runtime {
 public:
  // Collective: every process of the job constructs one Runtime.
  Runtime(int& argc, char**& argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  static Runtime& current();
  static Runtime* find();  // the process's Runtime, or nullptr

  int rank() const { return boot_->rank(); }
  int size() const { return boot_->size(); }
  int machine() const { return machine_; }
  int machines() const { return machines_; }
  const std::string& hostname() const { return hostname_; }
  int threads_per_process() const { return threads_; }
  int numa_zones() const { return static_cast<int>(allocators_.size()); }
  int local_zone() const { return local_zone_; }
  bool pinning() const { return pin_; }
  // LOOM_MAP_BY (loomrun --map-by) and the host's cores by zone (runtime/placement.hpp).
  runtime::MapBy map_by() const { return map_by_; }
  const runtime::MachineShape& machine_shape() const { return shape_; }
  // The NUMA zone of this process's thread `index` (0: the main thread; a worker's index is its
  // destination index for remote calls): where the placement puts it, or, threads floating
  // unpinned under map-by core, the process's zone.
  int thread_zone(int index) const;
  // Thread indices this process has used: the workers (threads_per_process()) and any spawned
  // past them.
  int threads_started() const { return std::max(threads_, next_thread_.load(std::memory_order_relaxed)); }

  runtime::Bootstrap& bootstrap() { return *boot_; }
  // Where every rank runs: hosts (ranks on one host can map each other's memory), job
  // directories, builds.
  const runtime::JobLayout& layout() const { return layout_; }
  fabric::Provider& provider() { return *provider_; }
  memory::RDMAAllocator& allocator(int zone = -1);
  // The heap served to remote allocations in `zone` (-1: this process's zone).
  memory::RegisteredHeap& heap(int zone = -1);
  runtime::Service& service() { return *service_; }
  // Pairwise exchange of bytes with one peer (set-ups two ranks make together: mailbox.hpp).
  runtime::Mailbox& mailbox() { return *mailbox_; }
  // Whether peers can still take part: every wait on other processes asks (peer_watch.hpp).
  runtime::PeerWatch& peers() { return *peers_; }
  // True if [addr, addr+len) is registered memory of this process (any zone).
  bool is_registered(const void* addr, size_t len) const;

  // The process barrier: one thread of every process calls it; it returns once all have. It
  // orders nothing in shared regions (Space::barrier does) and runs no remote calls
  // (Invoker::barrier does). A collective call (collectives()).
  void barrier(const std::source_location& where = std::source_location::current());
  // This process's collective calls, compared across processes in checking mode (LOOM_CHECK).
  runtime::Collectives& collectives() { return *collectives_; }
  // A failure found where nothing can be thrown (a check in a destructor's teardown): when this
  // Runtime is destroyed, after its teardown, the reason goes to stderr and the process ends with
  // status 1 instead of the program's own status.
  void fail_at_exit(const std::string& why);
  // Collective: builds a connected full mesh with the given queue sizes.
  std::unique_ptr<Mesh> make_mesh(const fabric::QpCaps& caps, uint32_t recv_cq_depth = 0);
  // The same with the given offloader, or none (direct injection), whatever LOOM_OFFLOAD says, and
  // `ways` queue pairs per peer (0: LOOM_QPS_PER_PEER; the same in every process): for comparing
  // the modes in one run (bench_offload). The offloader must outlive the mesh.
  std::unique_ptr<Mesh> make_mesh_offloaded(const fabric::QpCaps& caps, signal::offload::Offloader* offloader, int ways = 0);
  // Queue pairs per peer in the meshes (LOOM_QPS_PER_PEER, checked equal in every process).
  int qps_per_peer() const { return qps_per_peer_; }
  // The offloader the meshes' Transmitters post through, or nullptr (direct injection).
  signal::offload::Offloader* offloader() { return offloader_.get(); }
  // Starts a long-lived named thread (index 1, 2, ...), pinned when pinning is on.
  std::thread spawn(const std::string& label, std::function<void()> fn);
  // The same with a chosen index: a worker that takes the place of an earlier one (worker
  // indices 0 .. threads_per_process()-1 are the destinations of remote calls).
  std::thread spawn_at(int index, const std::string& label, std::function<void()> fn);

 private:
  void pin_thread(int index);
  void read_machine_shape();
  runtime::ProcessPlace place() const;
  size_t zone_index(int zone) const;  // -1: this process's zone; else checked
  void setup_topology();
  // The operating system's number of NUMA zone `zone` (hwloc's logical index), -1 if unknown.
  int zone_os_node(int zone) const;
  void start_offloader();
  void check_qps_per_peer();
  std::unique_ptr<Mesh> make_mesh_with(const fabric::QpCaps& caps, uint32_t recv_cq_depth, signal::offload::Offloader* offloader,
                                       int ways);

  std::unique_ptr<runtime::Bootstrap> boot_;
  std::unique_ptr<runtime::Collectives> collectives_;
  std::unique_ptr<fabric::Provider> provider_;
  std::unique_ptr<runtime::PeerWatch> peers_;
  std::vector<std::unique_ptr<memory::RDMAAllocator>> allocators_;
  std::vector<std::unique_ptr<memory::RegisteredHeap>> heaps_;
  std::unique_ptr<runtime::Service> service_;
  std::unique_ptr<runtime::Mailbox> mailbox_;  // on service_: goes before it
  // The meshes' executor and completer threads when offloading (LOOM_OFFLOAD); null for direct
  // injection. Meshes die before the Runtime, so their Transmitters before this.
  std::unique_ptr<signal::offload::Offloader> offloader_;
  runtime::JobLayout layout_;
  std::string hostname_;
  int machine_ = 0;
  int machines_ = 1;
  int threads_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int local_zone_ = 0;
  bool pin_ = false;
  int numa_zones_hint_ = 1;
  runtime::MapBy map_by_ = runtime::MapBy::Core;
  runtime::MachineShape shape_;
  std::vector<int> zone_ids_;  // shape_'s zone z is NUMA zone zone_ids_[z]
  int qps_per_peer_ = 1;
  std::atomic<int> next_thread_{1};
  void* topology_ = nullptr;  // hwloc_topology_t
  std::mutex failures_mu_;
  std::vector<std::string> failures_;
};

}  // namespace loom
