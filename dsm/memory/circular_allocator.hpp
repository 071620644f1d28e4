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

#include "loom/dsm/memory/rdma_allocator.hpp"

namespace loom::memory {

// Whatever produces flush numbers (a Transmitter). A tag t is complete once completed_flush() > t.
// Not virtual: the check sits on the allocation fast path and must inline to one load.
class FlushSource {
 public:
  // Acquire: pairs with advance_flush's release, so a thread that sees its tag complete sees the
  // poll of the completion that proved it.
  uint64_t completed_flush() const { return completed_.load(std::memory_order_acquire); }

 protected:
  // Only ever raised (monotone), by whoever observes a completion; returns the compare-and-swaps
  // that failed. Each failure saw the number raised by another observer to a value still below
  // `to`: one of the completions other threads had polled and not yet recorded, so the failures
  // are bounded by those, not by how often other threads act.
  uint32_t advance_flush(uint64_t to) {
    uint64_t cur = completed_.load(std::memory_order_relaxed);
    uint32_t failed = 0;
    while (cur < to && !completed_.compare_exchange_strong(cur, to, std::memory_order_acq_rel)) ++failed;
    return failed;
  }
  // The same, for a source whose completions are observed by one thread only.
  void advance_flush_single_writer(uint64_t to) {
    if (completed_.load(std::memory_order_relaxed) < to) completed_.store(to, std::memory_order_release);
  }

 private:
  alignas(64) std::atomic<uint64_t> completed_{0};
};

enum class Growth { Linear, Exponential };

// Half a cache line, allocated side by side: at 64 bytes a unit, 256 units (a send queue's
// worth) took 16 KiB of L1 next to the sources and the stream of WRITEs, and small posts through
// the Transmitter paid an L1 miss on them once messages passed 64 bytes.
//
// A unit's state is one number: it is reusable once its allocator's flush source has completed
// `due` (0: free now; kBusy: handed out). A tag t makes it t + 1. (Flags for "in use" and
// "tagged" and a use count cost about a sixth of a small post.)
struct alignas(32) Unit {
  static constexpr uint64_t kBusy = ~uint64_t{0};
  uint8_t* addr = nullptr;    // unit_size() bytes of registered memory
  uint64_t due = 0;
  Unit* ring_next = nullptr;  // the next unit in circular order
  uint32_t lkey = 0;
  uint32_t rkey = 0;

  uint8_t* bytes() const { return addr; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(addr); }
  bool busy() const { return due == kBusy; }
};
static_assert(sizeof(Unit) == 32);

// One allocator per thread and flush source (transmitter); not thread-safe.
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
    //
    // The check is against the flush number as last read, kept here: a signal covers a quarter
    // of the queue, so the source's counter changes once per dozens of hand-outs, and reading it
    // every time put two dependent loads (one into a line other threads write) on the path
    // (bench/README.md). A stale number only sends us to next_refresh().
    Unit* u = cur_;
    if (known_done_ < u->due) [[unlikely]] return next_refresh();
    take(u);
    return u;
  }
  // Marks a handed-out unit as used by the operation with flush tag `t` on `source`, which must
  // be the source of every tag this allocator sees.
  void tag(Unit* u, const FlushSource& source, uint64_t t) {
    if (&source != source_) bind(source);
    u->due = t + 1;
  }
  // Gives back a handed-out unit that was never posted.
  static void release(Unit* u) { u->due = 0; }
  bool reusable(const Unit* u) const { return source_->completed_flush() >= u->due; }
  // The unit's memory as a registered region.
  RDMAMemory memory(const Unit* u) const { return RDMAMemory{u->addr, unit_size_, u->lkey, u->rkey, backing_.zone()}; }

  size_t units() const { return count_; }
  size_t unit_size() const { return unit_size_; }
  size_t max_units() const { return max_units_; }
  // Makes `source` the allocator's flush source (refused if another one is bound already).
  void bind(const FlushSource& source);
  // While false, a full ring reports full instead of growing (growing allocates heap memory).
  void allow_growth(bool allowed) { growth_allowed_ = allowed; }

 private:
  void grow(size_t count);
  Unit* next_refresh();  // re-reads the flush number, then grows if the unit is still busy
  Unit* next_slow();
  void take(Unit* u) {
    cur_ = u->ring_next;
    u->due = Unit::kBusy;
  }

  RDMAAllocator& backing_;
  size_t unit_size_;
  size_t max_units_;
  Growth growth_;
  size_t initial_;
  std::vector<RDMAMemory> chunks_;
  std::vector<std::unique_ptr<Unit[]>> blocks_;  // every unit, one block per growth step
  size_t count_ = 0;
  Unit* cur_ = nullptr;      // the next to hand out
  const FlushSource* source_;  // an idle source (flush number 0) until the first tag
  bool growth_allowed_ = true;
  uint64_t known_done_ = 0;    // source_'s flush number when last read (it only grows)
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
  // One allocator serves one transmitter.
  void tag(const Segment& s, const FlushSource& source, uint64_t tag);
  bool reusable(const Unit* u) const { return ring_.reusable(u); }
  size_t units() const { return ring_.units(); }
  void allow_growth(bool allowed) { ring_.allow_growth(allowed); }

 private:
  CircularAllocator ring_;
  Unit* current_ = nullptr;
  size_t offset_ = 0;
  // The current unit stays busy while segments are cut from it; their tags gather here and
  // become its due when the allocator moves on.
  uint64_t current_due_ = 0;
};

}  // namespace loom::memory
