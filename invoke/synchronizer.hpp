#pragma once
// Synchronizers (counters decremented by calls) and return slots (where call_return's
// result lands), both in registered memory so the destination reaches them with one fabric op.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/invoke/wire.hpp"

namespace loom::invoke {

// A counter decremented by calls (seed 000's Synchronizer). It lives in registered memory so
// that an Executed-mode notification is one fabric FETCH_ADD from the destination.
class Synchronizer {
 public:
  explicit Synchronizer(int64_t count = 1);
  ~Synchronizer();
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;

  int64_t count() const { return static_cast<int64_t>(std::atomic_ref<uint64_t>(*word_).load(std::memory_order_acquire)); }
  bool done() const { return count() <= 0; }
  // Raises the count (before new calls); never while calls that notify it are in flight.
  void add(int64_t n) { std::atomic_ref<uint64_t>(*word_).fetch_add(static_cast<uint64_t>(n), std::memory_order_acq_rel); }
  // Returns once the count reaches zero. Meanwhile flushes this thread's aggregated calls and
  // runs the calls addressed to this thread, so two threads waiting on each other progress.
  void wait();

  // Internal: local decrement (Transmitted) and the descriptor for remote ones (Executed).
  void transmitted() { std::atomic_ref<uint64_t>(*word_).fetch_sub(1, std::memory_order_acq_rel); }
  wire::NotifyDesc notify_desc() const;

 private:
  memory::RDMAMemory mem_;
  uint64_t* word_;
};

namespace detail {
// A registered slot the destination writes a result into with one RDMA WRITE: the value, then
// an 8-byte stamp placed last (a notified flag, seed 002).
class ReturnSlotBase {
 public:
  explicit ReturnSlotBase(size_t value_size);
  ~ReturnSlotBase();
  ReturnSlotBase(const ReturnSlotBase&) = delete;
  ReturnSlotBase& operator=(const ReturnSlotBase&) = delete;
  // Prepares for one call: returns the descriptor it carries.
  wire::ReturnDesc arm();
  bool ready() const;
  void wait() const;  // drives this thread's progress meanwhile
  const void* value() const { return mem_.addr; }

 private:
  memory::RDMAMemory mem_;
  size_t size_;
  uint64_t stamp_ = 0;
};
}  // namespace detail

// Where call_return puts R (trivially copyable).
template <typename R>
class ReturnSlot : public detail::ReturnSlotBase {
  static_assert(std::is_trivially_copyable_v<R>, "call_return results must be trivially copyable");

 public:
  ReturnSlot() : ReturnSlotBase(sizeof(R)) {}
  // Waits for the result of the last call_return into this slot.
  R get() const {
    wait();
    R r;
    std::memcpy(&r, value(), sizeof r);
    return r;
  }
};

}  // namespace loom::invoke
