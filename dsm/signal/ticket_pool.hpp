#pragma once
// TicketPool: send-queue credits as tickets, taken and given back in one step each.
//
// `taken` counts tickets drawn, `returned` tickets finished (their post completed, was refused,
// or was never made). A thread draws n tickets with one fetch-and-add on `taken` and may spend
// ticket t once t < returned + capacity. At most `capacity` drawn tickets are then unfinished
// at any time, whatever order they are spent and finished in: the tickets below
// returned + capacity number returned + capacity, and `returned` of them are finished. So a
// thread never retries a read-modify-write; it only waits, while its ticket is not yet valid,
// for posts to complete — for the fabric, not for another thread's step.
//
// Single-thread pools (one thread draws and gives at a time) update both counters with a load
// and a store instead of locked instructions.
#include <atomic>
#include <cstdint>

namespace loom::signal {

class TicketPool {
 public:
  void init(uint64_t capacity, bool single_thread) {
    cap_ = capacity;
    single_ = single_thread;
  }
  uint64_t capacity() const { return cap_; }

  // The first of n tickets drawn (n may be 0: the next ticket, none drawn).
  uint64_t draw(uint64_t n) { return add(taken_, n); }
  // n tickets finished. Release: pairs with valid()'s acquire, so a thread spending a ticket sees
  // the poll of the completion that freed it.
  void give(uint64_t n) { add(returned_, n); }
  // One past the last ticket that may be spent now.
  uint64_t valid_until() const { return returned_.load(std::memory_order_acquire) + cap_; }
  bool valid(uint64_t ticket) const { return ticket < valid_until(); }
  // Tickets that could be drawn and spent at once now (negative: drawn tickets wait).
  int64_t free() const {
    return static_cast<int64_t>(valid_until()) - static_cast<int64_t>(taken_.load(std::memory_order_relaxed));
  }

 private:
  uint64_t add(std::atomic<uint64_t>& a, uint64_t d) {
    if (!single_) return a.fetch_add(d, std::memory_order_acq_rel);
    const uint64_t v = a.load(std::memory_order_relaxed);
    a.store(v + d, std::memory_order_release);
    return v;
  }

  alignas(64) std::atomic<uint64_t> taken_{0};
  alignas(64) std::atomic<uint64_t> returned_{0};
  uint64_t cap_ = 0;
  bool single_ = false;
};

}  // namespace loom::signal
