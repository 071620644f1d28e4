#include "loom/dsm/memory/circular_allocator.hpp"

#include <algorithm>

#include "loom/dsm/common/error.hpp"

namespace loom::memory {

namespace {
// The source of units never tagged: its flush number stays 0, so a due of 0 is reached.
const FlushSource kIdle;
}  // namespace

CircularAllocator::CircularAllocator(RDMAAllocator& backing, size_t unit_size, size_t initial_units, size_t max_units,
                                     Growth growth)
    : backing_(backing), unit_size_(unit_size), max_units_(max_units), growth_(growth), initial_(initial_units),
      source_(&kIdle) {
  if (unit_size == 0 || initial_units == 0 || max_units < initial_units)
    fail("CircularAllocator: need unit_size > 0 and 0 < initial_units <= max_units (got ", unit_size, ", ", initial_units,
         ", ", max_units, ")");
  unit_size_ = (unit_size + 63) & ~size_t{63};  // units never share a cache line
  grow(initial_units);
}

CircularAllocator::~CircularAllocator() {
  for (auto& c : chunks_) backing_.free_chunk(c);
}

void CircularAllocator::grow(size_t count) {
  if (count == 0) return;
  auto block = std::make_unique<Unit[]>(count);
  for (size_t i = 0; i < count; ++i) {
    if (spare_.addr == nullptr || spare_used_ + unit_size_ > spare_.size) {
      size_t want = std::max(unit_size_, kChunkGranule);
      spare_ = backing_.allocate_chunk(want);
      chunks_.push_back(spare_);
      spare_used_ = 0;
    }
    Unit& u = block[i];
    u.addr = spare_.bytes() + spare_used_;
    u.lkey = spare_.lkey;
    u.rkey = spare_.rkey;
    spare_used_ += unit_size_;
    if (i + 1 < count) u.ring_next = &block[i + 1];
  }
  Unit* first = &block[0];
  Unit* last = &block[count - 1];
  if (cur_ == nullptr) {
    last->ring_next = first;
  } else {
    // New units go in at the current position, so they are handed out next, ahead of the busy
    // unit. Growth is rare: finding the predecessor by a walk keeps the fast path to one store.
    Unit* before = cur_;
    while (before->ring_next != cur_) before = before->ring_next;
    last->ring_next = cur_;
    before->ring_next = first;
  }
  cur_ = first;
  count_ += count;
  blocks_.push_back(std::move(block));
}

void CircularAllocator::bind(const FlushSource& source) {
  if (source_ == &source) return;
  if (source_ != &kIdle) fail("CircularAllocator: one allocator serves one flush source (transmitter)");
  source_ = &source;
}

Unit* CircularAllocator::next_refresh() {
  known_done_ = source_->completed_flush();
  Unit* u = cur_;
  if (known_done_ < u->due) return next_slow();
  take(u);
  return u;
}

Unit* CircularAllocator::next_slow() {
  // The unit at the current position is still busy: grow (new units go in right here), or
  // report the ring full.
  if (count_ >= max_units_ || !growth_allowed_) return nullptr;
  size_t add = growth_ == Growth::Linear ? initial_ : count_;
  add = std::min(add, max_units_ - count_);
  grow(add);
  Unit* u = cur_;
  take(u);
  return u;
}

LinearCircularAllocator::LinearCircularAllocator(RDMAAllocator& backing, size_t unit_size, size_t initial_units,
                                                 size_t max_units, Growth growth)
    : ring_(backing, unit_size, initial_units, max_units, growth) {}

std::optional<LinearCircularAllocator::Segment> LinearCircularAllocator::allocate(size_t n, size_t align) {
  if (n == 0) n = 1;
  if (align == 0 || (align & (align - 1)) != 0) fail("LinearCircularAllocator: alignment ", align, " is not a power of two");
  if (n > ring_.unit_size()) return std::nullopt;
  size_t off = (offset_ + align - 1) & ~(align - 1);
  if (current_ == nullptr || off + n > ring_.unit_size()) {
    // The unit we leave stays busy until the tags of its segments complete (free at once if
    // none was tagged). It is left before the next is asked for: a ring that cannot grow may
    // come round to it (a ring of one unit always does).
    if (current_ != nullptr) current_->due = current_due_;
    current_ = nullptr;
    Unit* u = ring_.next();
    if (u == nullptr) return std::nullopt;
    current_ = u;
    current_due_ = 0;
    off = 0;
  }
  offset_ = off + n;
  return Segment{ring_.memory(current_).slice(off, n), current_};
}

void LinearCircularAllocator::tag(const Segment& s, const FlushSource& source, uint64_t t) {
  ring_.bind(source);
  Unit* u = s.unit;
  if (u == current_) {
    current_due_ = std::max(current_due_, t + 1);
  } else if (!u->busy()) {
    // A segment of a unit already left behind: its due can only rise.
    u->due = std::max(u->due, t + 1);
  }
}

}  // namespace loom::memory
