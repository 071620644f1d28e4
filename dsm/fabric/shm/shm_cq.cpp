// The completion ring's producer side and the retirement of send-queue entries.
#include <thread>

#include "loom/dsm/fabric/shm/shm_cq.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::fabric::shm {

bool cq_push(CqHeader* h, CqSlot* slots, uint32_t capacity, const Completion& c, uint32_t retire_qp, uint64_t retire_seq) {
  const uint64_t mask = capacity - 1;
  uint64_t t = h->tail.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t pos = t >> 1;
    CqSlot& s = slots[pos & mask];
    // Pairs with the consumer's release of the slot in ShmCq::poll (seq = pos + capacity after
    // it copied the completion out): the slot's last entry is read before it is overwritten.
    uint64_t seq = s.seq.load(std::memory_order_acquire);
    int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
    if (diff == 0) {
      if (h->tail.compare_exchange_weak(t, ((pos + 1) << 1) | 1u, std::memory_order_acq_rel)) {
        s.completion = c;
        s.retire_qp = retire_qp;
        s.retire_seq = retire_seq;
        // Publishes the entry: pairs with the consumer's acquire of seq in ShmCq::poll.
        s.seq.store(pos + 1, std::memory_order_release);
        if ((t & 1u) == 0) wait::futex_wake_all(wait::low_word(&h->tail));
        return true;
      }
    } else if (diff < 0) {
      // The slot still holds an entry from a lap ago. Either the ring is full, or a consumer
      // has claimed that entry and not yet released the slot (it may be preempted in
      // between): count before concluding, and wait for the release in the second case.
      // Pairs with the consumer's claim of the head (acq_rel CAS in ShmCq::poll).
      if (pos - h->head.load(std::memory_order_acquire) >= capacity) return false;
      wait::cpu_relax();
      std::this_thread::yield();
      t = h->tail.load(std::memory_order_relaxed);
    } else {
      t = h->tail.load(std::memory_order_relaxed);
    }
  }
}

void ShmCq::retire(uint32_t qpn, uint64_t seq) {
  if (ShmQp* qp = p_.qp_by_num(qpn)) qp->retire(seq);
}

}  // namespace loom::fabric::shm
