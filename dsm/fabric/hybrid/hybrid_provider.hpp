#pragma once
// The shm+verbs provider ("auto" when the job's ranks span hosts): shared memory to the ranks
// of this host, the RDMA device to the others, chosen per peer at start-up from the host each
// rank runs on (as MPI and UCX choose their transports).
//  - Memory is mapped by the shm provider (named segments the host's ranks map) and registered
//    with both; the keys handed out are the device's, and the alias file gives the shm key of
//    each (alias_table.hpp).
//  - Queue pairs to this host's ranks are shm queue pairs behind key translation
//    (same_host_qp.hpp); to other hosts', the device's own.
//  - Completion queues hold both (hybrid_cq.hpp).
//  - Where the device's atomics are not the CPU's (ATOMIC_HCA: rxe, most NICs), every atomic
//    goes through the device, to this host's ranks too, so that all atomics on a word are the
//    device's; cpu_atomics is then false and the layers above send their own atomics through
//    the fabric as on verbs.
#include <memory>
#include <mutex>
#include <unordered_map>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/fabric/hybrid/alias_table.hpp"
#include "loom/dsm/fabric/hybrid/hybrid_cq.hpp"
#include "loom/dsm/fabric/shm/shm_provider.hpp"
#include "loom/dsm/fabric/verbs/verbs_provider.hpp"

namespace loom::fabric::hybrid {

class HybridProvider : public Provider {
 public:
  explicit HybridProvider(const ProviderContext& ctx);
  ~HybridProvider() override;

  const ProviderInfo& info() const override { return info_; }
  Chunk map_chunk(size_t size, int numa_node) override;
  void unmap_chunk(const Chunk& c) override;
  void commit(const Chunk& c, size_t offset, size_t len) override { shm_->commit(c, offset, len); }
  MemoryRegion register_memory(void* addr, size_t len, uint32_t access) override;
  void deregister(const MemoryRegion& mr) override;
  std::unique_ptr<CompletionQueue> create_cq(uint32_t depth) override;
  std::unique_ptr<QueuePair> create_qp(int peer_rank, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                       const QpCaps& caps) override;
  bool peer_alive(int rank) const override;
  PeerTraffic traffic(int rank) const override { return device_->traffic(rank); }
  std::string transport(int rank) const override;

  bool same_host(int rank) const { return ctx_.same_host(rank, ctx_.rank); }

 private:
  const AliasFile* aliases_of(int rank);
  void drop_aliases(const MemoryRegion& device_mr);

  ProviderContext ctx_;
  ProviderInfo info_;
  std::unique_ptr<shm::ShmProvider> shm_;
  std::unique_ptr<verbs::VerbsProvider> device_;
  bool device_atomics_ = false;
  std::unique_ptr<EventRelay> relay_;
  shm::Mapping own_aliases_;
  std::mutex mu_;
  std::unordered_map<uint32_t, MemoryRegion> shm_mr_;  // by device lkey: the shm registration
  std::unordered_map<int, shm::Mapping> peer_aliases_;
};

}  // namespace loom::fabric::hybrid
