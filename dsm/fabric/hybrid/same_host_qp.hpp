#pragma once
// The shm+verbs provider's queue pair to a rank on this host: the shm provider's, with the
// device's keys translated to shm keys through the alias files (this process's for local
// buffers, the peer's for its memory). Where the device's atomics are not atomic with the CPU's
// (ProviderInfo::cpu_atomics false), atomics go through the device here too, on a device queue
// pair to the same peer (the "atomic lane", as UCX's device atomic mode): a word that ranks on
// other hosts update with device atomics is then never updated by the CPU behind their back.
// The lane runs each atomic to completion inside post_send, as the shm path carries out its
// requests, so the queue pair's order and accounting stay the shm queue pair's.
#include <memory>
#include <mutex>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/fabric/hybrid/alias_table.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"

namespace loom::fabric::hybrid {

class AtomicLane {
 public:
  AtomicLane(std::unique_ptr<CompletionQueue> cq, std::unique_ptr<QueuePair> qp);
  ~AtomicLane();
  std::vector<std::byte> endpoint() const { return qp_->endpoint(); }
  void connect(std::span<const std::byte> ep) { qp_->connect(ep); }
  void reset() { qp_->reset(); }
  // Posts the atomic (device keys as given) and waits for its completion.
  Status run(const SendWr& wr, uint32_t& byte_len);

 private:
  std::mutex mu_;  // one atomic at a time: the lane's queue is one deep
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
};

class SameHostQp : public QueuePair {
 public:
  SameHostQp(std::unique_ptr<QueuePair> shm_qp, std::unique_ptr<AtomicLane> lane, const AliasFile* own,
             std::function<const AliasFile*(int)> peer_aliases);
  ~SameHostQp() override;

  std::vector<std::byte> endpoint() const override;
  void connect(std::span<const std::byte> peer_endpoint) override;
  PostResult post_send(const SendWr& wr) override;
  PostResult post_recv(const RecvWr& wr) override;
  PostResult post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) override;
  QpState state() const override { return shm_->state(); }
  void reset() override;
  uint32_t qp_num() const override { return shm_->qp_num(); }
  int peer_rank() const override { return shm_->peer_rank(); }
  const QpCaps& caps() const override { return shm_->caps(); }
  bool inline_helps() const override { return shm_->inline_helps(); }
  uint8_t* remote_pointer(uint64_t remote_addr, uint32_t rkey, uint64_t len, uint32_t access) override {
    return shm_->remote_pointer(remote_addr, remote_key(rkey), len, access);
  }

 private:
  uint32_t local_key(uint32_t k) const { return alias_find(own_, k); }
  uint32_t remote_key(uint32_t k) const { return alias_find(peer_, k); }

  std::unique_ptr<shm::ShmQp> shm_;
  std::unique_ptr<AtomicLane> lane_;
  const AliasFile* own_;
  const AliasFile* peer_ = nullptr;  // mapped at connect
  std::function<const AliasFile*(int)> peer_aliases_;
};

}  // namespace loom::fabric::hybrid
