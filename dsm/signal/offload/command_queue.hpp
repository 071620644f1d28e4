#pragma once
// Seed 004's command queue: requests from any number of requester threads to one executor.
//
// `tail` is [count: 63 bits][active: 1 bit]. A requester claims ticket `count` with one
// fetch-and-add (wait-free) and learns from the bit whether the executor is watching this
// queue; if not, the one requester whose fetch-or sets the bit hands the queue to the executor
// (Offloader::activate). The executor clears the bit only with a compare-and-swap that expects
// the count it has consumed up to, so it stops watching only an empty queue, and every claim
// after that sees the bit clear: no command waits in a queue nobody watches
// (docs/offloading.md, "Why no wake is lost").
//
// Slots follow D. Vyukov's bounded queue: a slot's sequence is its ticket while free, ticket+1
// once its command is placed, ticket+capacity once the executor has taken it.
#include <atomic>
#include <cstdint>
#include <memory>

#include "loom/dsm/fabric/fabric.hpp"

namespace loom::signal::offload {

struct Command {
  static constexpr uint32_t kInlineBytes = 64;
  fabric::SendWr wr;
  bool force_signal = false;
  alignas(8) uint8_t payload[kInlineBytes];  // an inline request's bytes, copied at submit
};

class CommandQueue {
 public:
  struct Claim {
    uint64_t ticket;
    bool activate;  // this requester must hand the queue to the executor
  };

  explicit CommandQueue(uint32_t capacity);  // a power of two

  // Requester: one fetch-and-add, and a fetch-or only when the executor is not watching.
  Claim claim() {
    uint64_t old = tail_.fetch_add(2, std::memory_order_acq_rel);
    bool activate = (old & 1) == 0 && (tail_.fetch_or(1, std::memory_order_acq_rel) & 1) == 0;
    return {old >> 1, activate};
  }
  // Requester: the ticket's slot, once the executor has freed it (waits only when the queue is full).
  Command& slot_for(uint64_t ticket);
  // Requester: the command is in place. Pairs with peek()'s acquire.
  void publish(uint64_t ticket) {
    slot(ticket).seq.store(static_cast<uint32_t>(ticket + 1), std::memory_order_release);
  }

  // Executor: the next command, or nullptr if it is not placed yet.
  Command* peek() {
    Slot& s = slot(head_);
    return s.seq.load(std::memory_order_acquire) == static_cast<uint32_t>(head_ + 1) ? &s.cmd : nullptr;
  }
  // Executor: the command `i` places after the next one, or nullptr if it is not placed yet
  // (the look-ahead that batches commands and finds the last of a burst). i < capacity().
  Command* peek_at(uint32_t i) {
    Slot& s = slot(head_ + i);
    return s.seq.load(std::memory_order_acquire) == static_cast<uint32_t>(head_ + i + 1) ? &s.cmd : nullptr;
  }
  uint64_t head() const { return head_; }
  // Executor: recycles the slot peek() returned.
  void pop();
  // Executor: stops watching the queue if nothing was claimed past what it consumed.
  bool try_deactivate() {
    uint64_t expect = (head_ << 1) | 1;
    return tail_.compare_exchange_strong(expect, head_ << 1, std::memory_order_acq_rel);
  }

  // Any thread: tickets claimed so far, and whether the executor watches the queue.
  uint64_t claimed() const { return tail_.load(std::memory_order_acquire) >> 1; }
  bool active() const { return (tail_.load(std::memory_order_acquire) & 1) != 0; }
  uint32_t capacity() const { return mask_ + 1; }

 private:
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq{0};
    Command cmd;
  };
  Slot& slot(uint64_t t) { return slots_[t & mask_]; }
  const Slot& slot(uint64_t t) const { return slots_[t & mask_]; }

  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<uint32_t> full_waiters_{0};
  alignas(64) uint64_t head_ = 0;  // executor only
  uint32_t mask_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace loom::signal::offload
