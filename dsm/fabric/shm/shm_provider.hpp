#pragma once
// The shm provider: N processes on one host. Registered memory lives in named shared-memory
// segments under the job directory; one-sided operations are carried out by the initiating
// thread against the target's memory with no action by the target's CPU.
#include <sched.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/fabric/shm/shm_layout.hpp"
#include "loom/dsm/fabric/shm/wire_model.hpp"

namespace loom::fabric::shm {

// A mapped file; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t len) : addr_(addr), len_(len) {}
  Mapping(Mapping&& o) noexcept : addr_(o.addr_), len_(o.len_) { o.addr_ = nullptr; o.len_ = 0; }
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
  void* addr() const { return addr_; }
  size_t size() const { return len_; }
  template <typename T> T* as() const { return static_cast<T*>(addr_); }

  // Reserve::All gives the whole file its memory at creation (queues, key tables: used whole);
  // Reserve::None leaves that to ShmProvider::commit, per piece handed out (registered chunks).
  enum class Reserve { All, None };
  static Mapping create(const std::string& path, size_t len, Reserve reserve = Reserve::All);
  static Mapping open(const std::string& path);  // throws if missing
  // Opens the file, or creates it zero-filled at `len` if no process has yet (every process of
  // the job may call it at once).
  static Mapping open_or_create(const std::string& path, size_t len);

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

class ShmQp;
class ShmCq;
class WireEngine;

class ShmProvider : public Provider {
  static constexpr size_t kFastSegments = 4096;

 public:
  explicit ShmProvider(const ProviderContext& ctx);
  ~ShmProvider() override;

  const ProviderInfo& info() const override { return info_; }
  Chunk map_chunk(size_t size, int numa_node) override;
  void unmap_chunk(const Chunk& c) override;
  void commit(const Chunk& c, size_t offset, size_t len) override;
  MemoryRegion register_memory(void* addr, size_t len, uint32_t access) override;
  void deregister(const MemoryRegion& mr) override;
  std::unique_ptr<CompletionQueue> create_cq(uint32_t depth) override;
  std::unique_ptr<QueuePair> create_qp(int peer_rank, CompletionQueue& send_cq,
                                       CompletionQueue& recv_cq, const QpCaps& caps) override;
  bool peer_alive(int rank) const override;
  // "shm", or "wire:NAME" to a rank on another emulated node (shm behind the emulated wire).
  std::string transport(int rank) const override;

  // Internal, used by queue pairs and completion queues.
  int rank() const { return ctx_.rank; }
  std::string path(const std::string& kind, int rank, uint64_t id) const;
  // Where rank's huge-page segment lives (under its own launcher's job on the mount).
  std::string huge_path(int rank, uint64_t segment) const;
  const KeyTable* key_table(int rank);                    // maps on first use
  // A peer's segment as mapped in this process (mapped on first use; base nullptr if gone).
  struct SegmentView {
    uint8_t* base = nullptr;
    uint64_t size = 0;
  };
  SegmentView segment(int rank, uint64_t segment) {
    if (segment < kFastSegments && rank >= 0 && rank < ctx_.size) {
      const Peer& p = peers_[static_cast<size_t>(rank)];
      if (uint8_t* b = p.fast[segment].load(std::memory_order_acquire))
        return SegmentView{b, p.fast_size[segment].load(std::memory_order_relaxed)};
    }
    return segment_slow(rank, segment);
  }
  KeyTable* own_keys() { return keys_.as<KeyTable>(); }
  ShmQp* qp_by_num(uint32_t qpn) const;
  SegmentView segment_slow(int rank, uint64_t segment);
  void forget_qp(uint32_t qpn);
  uint64_t rnr_timeout_ns() const { return rnr_timeout_ns_; }
  // The emulated wire (LOOM_WIRE; an empty name when there is none) and each rank's node.
  const WireSpec& wire() const { return wire_; }
  int wire_node(int rank) const { return wire_.name.empty() ? 0 : wire_node_[static_cast<size_t>(rank)]; }
  bool across_wire(int rank) const { return wire_node(rank) != wire_node(ctx_.rank); }
  // Requests on the wire not yet completed (or dropped), for tests.
  uint64_t wire_in_flight() const;

 private:
  struct LocalChunk {
    size_t size;
    uint64_t segment;
    Mapping map;
    std::string file;
  };
  struct Peer {
    Mapping keys;
    std::unordered_map<uint64_t, Mapping> segments;
    std::unique_ptr<std::atomic<uint8_t*>[]> fast;        // segment id -> base, set once
    std::unique_ptr<std::atomic<uint64_t>[]> fast_size;   // ... and its mapped size, set before
  };

  ProviderContext ctx_;
  ProviderInfo info_;
  Mapping keys_;
  std::string huge_dir_;  // hugetlbfs directory for this job, empty if none usable

  mutable std::mutex mu_;
  std::map<uintptr_t, LocalChunk> chunks_;  // by base address
  uint64_t next_segment_ = 1;
  std::vector<uint32_t> free_key_indices_;
  std::vector<uint16_t> key_generation_;
  std::vector<Peer> peers_;
  uint32_t next_cq_ = 1;
  std::unique_ptr<std::atomic<int>[]> dead_;  // 1 once a peer is known dead

  static constexpr uint32_t kMaxQps = 8192;
  std::unique_ptr<std::atomic<ShmQp*>[]> qps_;
  std::atomic<uint32_t> next_qp_{1};
  uint64_t rnr_timeout_ns_ = 0;

  void set_up_wire();
  WireSpec wire_;
  std::vector<int> wire_node_;
  Mapping wire_links_;                  // a LinkClock per emulated node, shared by the job
  std::unique_ptr<WireEngine> engine_;  // started with the first QP across the wire
  cpu_set_t wire_cpus_;                 // where its thread runs: the process's CPUs at start-up
  friend class ShmCq;
};

}  // namespace loom::fabric::shm
