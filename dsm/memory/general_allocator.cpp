#include "loom/dsm/memory/general_allocator.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::memory {

const char* to_string(Fit f) {
  switch (f) {
    case Fit::First: return "first-fit";
    case Fit::Next: return "next-fit";
    case Fit::Best: return "best-fit";
    case Fit::Worst: return "worst-fit";
  }
  return "unknown-fit";
}

Fit parse_fit(const std::string& s) {
  if (s == "first" || s == "first-fit") return Fit::First;
  if (s == "next" || s == "next-fit") return Fit::Next;
  if (s == "best" || s == "best-fit") return Fit::Best;
  if (s == "worst" || s == "worst-fit") return Fit::Worst;
  fail("unknown allocation policy '", s, "' (use first, next, best or worst)");
}

GeneralAllocator::GeneralAllocator(uint64_t size, Fit fit, uint64_t alignment)
    : size_(size), fit_(fit), align_(alignment), free_bytes_(0) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail("allocator alignment ", alignment, " is not a power of two");
  uint64_t usable = size & ~(alignment - 1);
  if (usable > 0) insert_free(0, usable);
}

void GeneralAllocator::insert_free(uint64_t off, uint64_t len) {
  by_offset_.emplace(off, len);
  by_size_.emplace(len, off);
  free_bytes_ += len;
}

void GeneralAllocator::erase_free(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  free_bytes_ -= it->second;
  by_offset_.erase(it);
}

uint64_t GeneralAllocator::largest_free() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }

std::optional<uint64_t> GeneralAllocator::allocate(uint64_t n) {
  if (n == 0) n = 1;
  if (n > size_) return std::nullopt;
  n = (n + align_ - 1) & ~(align_ - 1);
  std::map<uint64_t, uint64_t>::iterator chosen = by_offset_.end();
  switch (fit_) {
    case Fit::First:
      for (auto it = by_offset_.begin(); it != by_offset_.end(); ++it)
        if (it->second >= n) { chosen = it; break; }
      break;
    case Fit::Next: {
      auto it = by_offset_.lower_bound(rover_);
      for (size_t seen = 0; seen < by_offset_.size(); ++seen) {
        if (it == by_offset_.end()) it = by_offset_.begin();
        if (it->second >= n) { chosen = it; break; }
        ++it;
      }
      break;
    }
    case Fit::Best: {
      auto s = by_size_.lower_bound({n, 0});
      if (s != by_size_.end()) chosen = by_offset_.find(s->second);
      break;
    }
    case Fit::Worst:
      if (!by_size_.empty() && by_size_.rbegin()->first >= n) chosen = by_offset_.find(by_size_.rbegin()->second);
      break;
  }
  if (chosen == by_offset_.end()) return std::nullopt;
  uint64_t off = chosen->first, len = chosen->second;
  erase_free(chosen);
  if (len > n) insert_free(off + n, len - n);
  used_.emplace(off, n);
  rover_ = off + n;
  return off;
}

void GeneralAllocator::free(uint64_t offset) {
  auto u = used_.find(offset);
  if (u == used_.end()) fail("free of offset ", offset, ": not an allocated block (double free or bad pointer)");
  uint64_t off = offset, len = u->second;
  used_.erase(u);
  // Coalesce with the free neighbours on both sides.
  auto next = by_offset_.lower_bound(off);
  if (next != by_offset_.end() && next->first == off + len) {
    len += next->second;
    erase_free(next);
  }
  auto prev = by_offset_.lower_bound(off);
  if (prev != by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == off) {
      off = prev->first;
      len += prev->second;
      erase_free(prev);
    }
  }
  insert_free(off, len);
}

std::optional<uint64_t> GeneralAllocator::block_size(uint64_t offset) const {
  auto u = used_.find(offset);
  if (u == used_.end()) return std::nullopt;
  return u->second;
}

}  // namespace loom::memory
