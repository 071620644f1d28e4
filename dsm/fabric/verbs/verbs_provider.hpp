#pragma once
// The verbs provider: the provider contract over libibverbs (rdma-core) — InfiniBand, RoCE NICs
// and Soft-RoCE (rdma_rxe). RC queue pairs, one protection domain per process.
#include <infiniband/verbs.h>

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "loom/dsm/fabric/fabric.hpp"

namespace loom::fabric::verbs {

// What devices and ports exist here, for loom-info and for clear errors.
struct PortReport {
  std::string device;
  int port = 0;
  bool active = false;
  std::string link_layer;
  uint16_t lid = 0;
  std::string state;
  std::string mtu;
  std::vector<std::string> gids;  // "index: address"
};
struct DeviceReport {
  std::string name;
  uint32_t max_qp = 0, max_qp_wr = 0, max_cqe = 0, max_mr = 0, max_sge = 0;
  uint64_t max_mr_size = 0;
  std::string atomic_cap;
  std::vector<PortReport> ports;
};
// Lists devices; `error` says why there are none (or why the list failed).
std::vector<DeviceReport> survey(std::string* error);

class VerbsQp;

class VerbsProvider : public Provider {
 public:
  explicit VerbsProvider(const ProviderContext& ctx);
  ~VerbsProvider() override;

  const ProviderInfo& info() const override { return info_; }
  Chunk map_chunk(size_t size, int numa_node) override;
  void unmap_chunk(const Chunk& c) override;
  // Nothing to do: chunks are private anonymous memory (huge pages reserved at mmap), and
  // register_memory pins every page of what it registers.
  void commit(const Chunk&, size_t, size_t) override {}
  MemoryRegion register_memory(void* addr, size_t len, uint32_t access) override;
  void deregister(const MemoryRegion& mr) override;
  std::unique_ptr<CompletionQueue> create_cq(uint32_t depth) override;
  std::unique_ptr<QueuePair> create_qp(int peer_rank, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                       const QpCaps& caps) override;
  bool peer_alive(int rank) const override;
  PeerTraffic traffic(int rank) const override;

  // Memory mapped by another provider (the shm+verbs provider's shared segments), registered
  // here too: adopt_chunk records it (register_memory accepts ranges in it); unmap_chunk then
  // deregisters what lies in it and drops it without unmapping it.
  void adopt_chunk(const Chunk& c);

  // Internal.
  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }
  uint16_t lid() const { return lid_; }
  ibv_mtu mtu() const { return mtu_; }
  int rank() const { return pctx_.rank; }
  int peer_of_qp(uint32_t qpn) const;
  void set_qp_peer(uint32_t qpn, int rank);
  void forget_qp(uint32_t qpn);
  void mark_qp_error(uint32_t qpn);
  // Send/receive queue accounting for a completion of `qpn` polled from `cq`.
  void account(uint32_t qpn, const void* cq, bool error, bool recv_opcode);
  // Counts a request posted to `rank` (device traffic per peer: traffic()).
  void count_post(int rank, bool atomic) {
    auto& c = atomic ? atomics_[static_cast<size_t>(rank)] : posts_[static_cast<size_t>(rank)];
    c.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  ProviderContext pctx_;
  ProviderInfo info_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 1;
  int gid_index_ = 0;
  ibv_gid gid_{};
  uint16_t lid_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;

  mutable std::mutex mu_;
  std::map<uintptr_t, Chunk> chunks_;
  std::set<uintptr_t> foreign_;  // chunks adopted from another provider (not unmapped here)
  std::unique_ptr<std::atomic<uint64_t>[]> posts_;    // per peer: requests posted, atomics apart
  std::unique_ptr<std::atomic<uint64_t>[]> atomics_;
  std::unordered_map<uint32_t, ibv_mr*> mrs_;  // by lkey
  std::unordered_map<uint32_t, int> qp_peers_;
  std::unordered_map<uint32_t, VerbsQp*> qps_;
};

}  // namespace loom::fabric::verbs
