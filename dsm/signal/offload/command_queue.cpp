#include "loom/dsm/signal/offload/command_queue.hpp"

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/futex.hpp"

namespace loom::signal::offload {

CommandQueue::CommandQueue(uint32_t capacity) : mask_(capacity - 1), slots_(new Slot[capacity]) {
  if (capacity < 2 || (capacity & (capacity - 1)) != 0) fail("offload: a command queue of ", capacity, " slots (need a power of two)");
  for (uint32_t i = 0; i < capacity; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
}

Command& CommandQueue::slot_for(uint64_t ticket) {
  Slot& s = slot(ticket);
  const auto want = static_cast<uint32_t>(ticket);
  // Pairs with pop()'s release: the executor is done with the slot's previous command.
  if (s.seq.load(std::memory_order_acquire) == want) return s.cmd;
  wait::Backoff b(wait::Backoff::kYields, 256);
  for (;;) {
    uint32_t seen = s.seq.load(std::memory_order_acquire);
    if (seen == want) return s.cmd;
    if (!b.should_sleep()) {
      b.spin_or_yield();
      continue;
    }
    full_waiters_.fetch_add(1, std::memory_order_seq_cst);
    // pop() stores the sequence, then reads the count of waiters: one of the two sees the other.
    if (s.seq.load(std::memory_order_seq_cst) != want) wait::futex_wait(&s.seq, seen, std::chrono::milliseconds(100));
    full_waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void CommandQueue::pop() {
  Slot& s = slot(head_);
  s.seq.store(static_cast<uint32_t>(head_ + mask_ + 1), std::memory_order_seq_cst);
  ++head_;
  if (full_waiters_.load(std::memory_order_seq_cst) != 0) wait::futex_wake_all(&s.seq);
}

}  // namespace loom::signal::offload
