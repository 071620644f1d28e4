#pragma once
// Circular and linear-circular allocators (seed 000 §4.2). Units are recycled by flush-number
// tags: a unit used by an operation tagged t on some FlushSource is free again once that source's
// completed flush number passes t — many units are released by one counter update, without
// per-buffer completion events. One allocator per thread per transmitter; not thread-safe.
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "dsm/memory/rdma_allocator.hpp"

namespace loom::memory {

// Whatever produces flush numbers (a Transmitter). A tag t is complete once completed_flush() > t.
// Not virtual: the check sits on the allocation fast path and must inline to one load.
class FlushSource {
 public:
  uint64_t completed_flush() const { return completed_.load(std::memory_order_acquire); }

 protected:
  // Only ever raised (monotone), by whoever observes a completion.
  void advance_flush(uint64_t to) {
    uint64_t cur = completed_.load(std::memory_order_relaxed);
    while (cur < to && !completed_.compare_exchange_weak(cur, to, std::memory_order_acq_rel)) {
    }
  }
  // The same, for a source whose completions are observed by one thread only.
  void advance_flush_single_writer(uint64_t to) {
    if (completed_.load(std::memory_order_relaxed) < to) completed_.store(to, std::memory_order_release);
  }

 private:
  alignas(64) std::atomic<uint64_t> completed_{0};
};

enum class Growth { Linear, Exponential };

// One cache line: the allocation fast path reads the whole of it.
struct alignas(64) Unit {
  RDMAMemory mem;
  const FlushSource* source = nullptr;
  uint64_t tag = 0;
  Unit* ring_next = nullptr;  // the next unit in circular order
  uint32_t uses = 0;          // how many times it was handed out
  bool tagged = false;
  bool in_use = false;

  bool reusable() const { return !in_use && (!tagged || source->completed_flush() > tag); }
};

class CircularAllocator {
 public:
  CircularAllocator(RDMAAllocator& backing, size_t unit_size, size_t initial_units, size_t max_units,
                    Growth growth = Growth::Exponential);
  ~CircularAllocator();
  CircularAllocator(const CircularAllocator&) = delete;
  CircularAllocator& operator=(const CircularAllocator&) = delete;

  // The next unit in circular order if it is reusable; otherwise grows (up to max_units);
  // nullptr when full — the caller drives its transmitter's progress and asks again.
  Unit* next() {
    // The units form a circular list: one load finds the next, where an index into a vector
    // needed three dependent ones on the path of every post.
    Unit* u = cur_;
    if (!u->reusable()) return next_slow();
    take(u);
    return u;
  }
  // Marks a handed-out unit as used by the operation with flush tag `tag` on `source`.
  static void tag(Unit* u, const FlushSource& source, uint64_t t) {
    u->source = &source;
    u->tag = t;
    u->tagged = true;
    u->in_use = false;
  }
  // Gives back a handed-out unit that was never posted.
  static void release(Unit* u) { u->in_use = false; }

  size_t units() const { return storage_.size(); }
  size_t unit_size() const { return unit_size_; }
  size_t max_units() const { return max_units_; }

 private:
  void grow(size_t count);
  Unit* next_slow();
  void take(Unit* u) {
    cur_ = u->ring_next;
    u->in_use = true;
    u->tagged = false;
    ++u->uses;
  }

  RDMAAllocator& backing_;
  size_t unit_size_;
  size_t max_units_;
  Growth growth_;
  size_t initial_;
  std::vector<RDMAMemory> chunks_;
  std::vector<std::unique_ptr<Unit>> storage_;  // every unit (the circle runs through ring_next)
  Unit* cur_ = nullptr;      // the next to hand out
  RDMAMemory spare_;  // unused tail of the last chunk
  size_t spare_used_ = 0;
};

// Variable-size segments carved from circular units, avoiding internal fragmentation.
class LinearCircularAllocator {
 public:
  struct Segment {
    RDMAMemory mem;
    Unit* unit = nullptr;
  };
  LinearCircularAllocator(RDMAAllocator& backing, size_t unit_size, size_t initial_units, size_t max_units,
                          Growth growth = Growth::Exponential);
  // A segment of n bytes aligned to `align`, or nullopt when the ring is full (or n > unit).
  std::optional<Segment> allocate(size_t n, size_t align = 8);
  // Tags the segment's unit; the unit is reusable once every segment tagged in it completed.
  void tag(const Segment& s, const FlushSource& source, uint64_t tag);
  size_t units() const { return ring_.units(); }

 private:
  CircularAllocator ring_;
  Unit* current_ = nullptr;
  size_t offset_ = 0;
};

}  // namespace loom::memory
