#pragma once
// The shm completion queue: a ring in a shared segment that any process of the job may push
// into (cq_push), polled by its owner; sleepers wait on a futex in the tail word.
#include <atomic>
#include <chrono>
#include <span>
#include <string>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/shm/shm_internal.hpp"
#include "loom/dsm/fabric/shm/shm_provider.hpp"
#include "loom/dsm/common/futex.hpp"

namespace loom::fabric::shm {

class ShmCq : public CompletionQueue {
 public:
  ShmCq(ShmProvider& p, uint32_t id, uint32_t depth) : p_(p), id_(id) {
    // Spare entries for error completions of unsignaled requests, which may arrive out of order.
    uint32_t cap = round_pow2((depth < 2 ? 2 : depth) + kCqSpare);
    size_t bytes = sizeof(CqHeader) + sizeof(CqSlot) * cap;
    map_ = Mapping::create(p.path("cq", p.rank(), id), bytes);
    h_ = new (map_.addr()) CqHeader();
    slots_ = reinterpret_cast<CqSlot*>(static_cast<uint8_t*>(map_.addr()) + sizeof(CqHeader));
    for (uint32_t i = 0; i < cap; ++i) new (&slots_[i]) CqSlot{};
    for (uint32_t i = 0; i < cap; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
    h_->capacity = cap;
    h_->mask = cap - 1;
    cap_ = cap;
    h_->head.store(0);
    h_->tail.store(1);  // count 0, awake
    h_->magic = kCqMagic;
  }
  ~ShmCq() override { ::unlink(p_.path("cq", p_.rank(), id_).c_str()); }

  int poll(std::span<Completion> out) override {
    int n = 0;
    while (static_cast<size_t>(n) < out.size()) {
      uint64_t h = h_->head.load(std::memory_order_relaxed);
      CqSlot& s = slots_[h & (cap_ - 1)];
      // Pairs with cq_push's release of seq = pos + 1 after it wrote the entry (shm_cq.cpp).
      uint64_t seq = s.seq.load(std::memory_order_acquire);
      int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(h + 1);
      if (diff < 0) break;
      if (diff > 0) continue;  // another consumer took it; reload
      if (!h_->head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) continue;
      out[n] = s.completion;
      uint32_t rq = s.retire_qp;
      uint64_t rs = s.retire_seq;
      // Hands the slot to the next lap: pairs with cq_push's acquire of seq.
      s.seq.store(h + cap_, std::memory_order_release);
      if (rq != 0) retire(rq, rs);
      ++n;
    }
    return n;
  }

  void wait(std::chrono::nanoseconds timeout) override { wait_also(timeout, nullptr); }

  // wait(), also returning once `pending` is set by a thread that sets it and then calls
  // interrupt() (the shm+verbs provider's relay of device completion events). The pending load
  // follows the clearing of the awake bit, and the relay's interrupt follows its store (all
  // sequentially consistent): either this sees the flag, or the interrupt finds the bit clear
  // and changes the futex word.
  void wait_also(std::chrono::nanoseconds timeout, const std::atomic<uint32_t>* pending) {
    uint64_t t = h_->tail.load(std::memory_order_acquire);
    if ((t >> 1) != h_->head.load(std::memory_order_acquire)) return;  // not empty
    if (t & 1u) {
      if (!h_->tail.compare_exchange_strong(t, t & ~uint64_t{1}, std::memory_order_seq_cst)) return;
      t &= ~uint64_t{1};
    }
    if (pending == nullptr || pending->load(std::memory_order_seq_cst) == 0)
      wait::futex_wait(wait::low_word(&h_->tail), static_cast<uint32_t>(t), timeout);
    h_->tail.fetch_or(1u, std::memory_order_acq_rel);  // awake again: producers skip the wake
  }

  void interrupt() override {
    h_->tail.fetch_or(1u, std::memory_order_seq_cst);
    wait::futex_wake_all(wait::low_word(&h_->tail));
  }

  uint32_t capacity() const override { return cap_; }
  bool overrun() const override { return h_->overrun.load(std::memory_order_acquire) != 0; }

  bool push_local(const Completion& c, uint32_t retire_qp, uint64_t retire_seq) {
    return cq_push(h_, slots_, cap_, c, retire_qp, retire_seq);
  }
  uint32_t id() const { return id_; }
  std::string describe() const {
    return detail::concat("cq head ", h_->head.load(), ", tail ", h_->tail.load() >> 1, ", capacity ", h_->capacity);
  }

  // Capacity bookkeeping: a CQ never overruns from its own QPs' send completions.
  std::atomic<uint64_t> reserved_send{0};
  std::atomic<uint64_t> reserved_recv{0};

 private:
  void retire(uint32_t qpn, uint64_t seq);

  ShmProvider& p_;
  uint32_t id_;
  Mapping map_;
  CqHeader* h_ = nullptr;
  CqSlot* slots_ = nullptr;
  uint32_t cap_ = 0;  // ours: the header's copy is writable by peers
};

}  // namespace loom::fabric::shm
