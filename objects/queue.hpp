#pragma once
// A bounded distributed queue, one-sided (seed 001 section III; docs/objects.md, "Queue"): a
// circular array of slots at one host process, pushed and popped by any process with fabric
// operations only (no CPU at the host). The algorithm is a bounded multi-producer,
// multi-consumer array queue with a sequence word per slot: slot i starts with sequence i; a
// push at position p claims it when the slot's sequence is p (CAS of the tail p -> p+1), writes
// the value, then publishes sequence p+1; a pop at position p takes the slot when its sequence
// is p+1 (CAS of the head), reads the value, then frees the slot for the next lap with sequence
// p+capacity. Each step is completed before the next is posted, so the value is in place before
// its sequence says so, and read before the slot is given back.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "dsm/common/error.hpp"
#include "objects/endpoint.hpp"

namespace loom::objects {

template <typename T>
class Queue {
  static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>, "Queue: values travel as bytes");

 public:
  // Collective: every process passes the same host and capacity (checked).
  Queue(Endpoint& ep, int host, size_t capacity) : ep_(ep), host_(host), cap_(capacity) {
    Runtime& rt = ep.runtime();
    if (host < 0 || host >= rt.size()) fail("objects: Queue host rank ", host, " is not in 0..", rt.size() - 1);
    if (capacity == 0) fail("objects: Queue of capacity 0");
    const Shape mine{static_cast<uint64_t>(host), static_cast<uint64_t>(capacity)};
    for (const Shape& s : rt.bootstrap().allgather_value(mine))
      if (s.host != mine.host || s.capacity != mine.capacity)
        fail("objects: Queue made with different hosts or capacities by different processes");
    if (rt.rank() == host) {
      base_ = ep.allocate<std::byte>(host, kSlots + capacity * sizeof(Slot));
      auto* words = base_.template as<uint64_t>().local();
      words[0] = words[1] = 0;  // head, tail
      Slot* slots = reinterpret_cast<Slot*>(base_.local() + kSlots);
      for (size_t i = 0; i < capacity; ++i) slots[i].seq = i;
    }
    base_ = rt.bootstrap().allgather_value(base_)[static_cast<size_t>(host)];
    rt.barrier();
  }
  // Collective: the memory goes once nobody uses it.
  ~Queue() {
    ep_.runtime().barrier();
    if (ep_.runtime().rank() == host_) ep_.deallocate(base_);
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  size_t capacity() const { return cap_; }

  // False when the queue is full (nothing is changed).
  bool try_push(const T& v) {
    uint64_t pos = ep_.atomic_load(head_tail(1));
    for (;;) {
      const uint64_t seq = ep_.atomic_load(seq_of(pos));
      if (seq == pos) {
        const uint64_t old = ep_.compare_swap(head_tail(1), pos, pos + 1);
        if (old != pos) {
          pos = old;
          continue;
        }
        ep_.rput(value_of(pos), v);
        publish(pos, pos, pos + 1);
        return true;
      }
      if (seq < pos) return false;  // the slot still holds the value of the lap before: full
      pos = ep_.atomic_load(head_tail(1));
    }
  }
  // Empty: nullopt.
  std::optional<T> try_pop() {
    uint64_t pos = ep_.atomic_load(head_tail(0));
    for (;;) {
      const uint64_t seq = ep_.atomic_load(seq_of(pos));
      if (seq == pos + 1) {
        const uint64_t old = ep_.compare_swap(head_tail(0), pos, pos + 1);
        if (old != pos) {
          pos = old;
          continue;
        }
        const T v = ep_.rget(value_of(pos));
        publish(pos, pos + 1, pos + cap_);
        return v;
      }
      if (seq < pos + 1) return std::nullopt;  // not yet pushed: empty
      pos = ep_.atomic_load(head_tail(0));
    }
  }

 private:
  struct Slot {
    uint64_t seq;
    T value;
  };
  struct Shape {  // what every process must agree on
    uint64_t host, capacity;
  };
  static constexpr size_t kSlots = 64;  // head and tail words, then the slots on their own line

  GlobalPtr<uint64_t> head_tail(int which) const { return base_.template as<uint64_t>() + which; }
  GlobalPtr<std::byte> slot(uint64_t pos) const { return base_ + static_cast<std::ptrdiff_t>(kSlots + (pos % cap_) * sizeof(Slot)); }
  GlobalPtr<uint64_t> seq_of(uint64_t pos) const { return slot(pos).template as<uint64_t>(); }
  GlobalPtr<T> value_of(uint64_t pos) const { return (slot(pos) + static_cast<std::ptrdiff_t>(offsetof(Slot, value))).template as<T>(); }
  // Only the slot's holder changes its sequence between these values.
  void publish(uint64_t pos, uint64_t from, uint64_t to) {
    if (ep_.compare_swap(seq_of(pos), from, to) != from) fail("objects: Queue slot ", pos % cap_, " changed while held (corrupt)");
  }

  Endpoint& ep_;
  int host_;
  size_t cap_;
  GlobalPtr<std::byte> base_;
};

}  // namespace loom::objects
