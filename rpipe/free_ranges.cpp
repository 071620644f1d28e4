#include "loom/rpipe/free_ranges.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::rpipe {

FreeRanges::FreeRanges(Fit fit, uint64_t segment_bytes) : fit_(fit), segment_bytes_(segment_bytes) {
  if (segment_bytes == 0) fail("rpipe: a heap's segments cannot be 0 bytes");
}

void FreeRanges::add_segment(uint32_t s) {
  if (s != segments_) fail("rpipe: segment ", s, " added after ", segments_, " segments (they come in order)");
  ++segments_;
  insert(static_cast<uint64_t>(s) * segment_bytes_, segment_bytes_);
  free_ += segment_bytes_;
}

void FreeRanges::insert(uint64_t pos, uint64_t len) {
  by_pos_.emplace(pos, len);
  by_size_.emplace(len, pos);
}

void FreeRanges::erase(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_pos_.erase(it);
}

uint64_t FreeRanges::carve(std::map<uint64_t, uint64_t>::iterator it, uint64_t n) {
  const uint64_t pos = it->first, len = it->second;
  erase(it);
  if (len > n) insert(pos + n, len - n);
  free_ -= n;
  return pos;
}

std::map<uint64_t, uint64_t>::iterator FreeRanges::first_fit_from(std::map<uint64_t, uint64_t>::iterator it,
                                                                  std::map<uint64_t, uint64_t>::iterator end, uint64_t n) {
  for (; it != end; ++it)
    if (it->second >= n) return it;
  return by_pos_.end();
}

std::optional<uint64_t> FreeRanges::take_next(uint64_t n) {
  // The range holding the cursor counts from the cursor on; then the ranges after it; then,
  // wrapping, those before.
  auto at = by_pos_.lower_bound(cursor_);  // the first range starting at the cursor or after it
  if (at != by_pos_.begin()) {
    auto prev = std::prev(at);  // starts before the cursor
    const uint64_t end = prev->first + prev->second;
    if (cursor_ < end && end - cursor_ >= n) {
      // Split the range at the cursor: the part before it stays free.
      const uint64_t pos = prev->first;
      erase(prev);
      insert(pos, cursor_ - pos);
      insert(cursor_, end - cursor_);
      at = by_pos_.find(cursor_);
      const uint64_t got = carve(at, n);
      cursor_ = got + n;
      return got;
    }
  }
  auto it = first_fit_from(at, by_pos_.end(), n);
  if (it == by_pos_.end()) it = first_fit_from(by_pos_.begin(), at, n);
  if (it == by_pos_.end()) return std::nullopt;
  const uint64_t got = carve(it, n);
  cursor_ = got + n;
  return got;
}

std::optional<uint64_t> FreeRanges::take(uint64_t n) {
  if (n == 0 || n > segment_bytes_) return std::nullopt;
  switch (fit_) {
    case Fit::Next:
      return take_next(n);
    case Fit::Best: {
      auto s = by_size_.lower_bound({n, 0});
      if (s == by_size_.end()) return std::nullopt;
      return carve(by_pos_.find(s->second), n);
    }
    case Fit::Worst: {
      if (by_size_.empty() || by_size_.rbegin()->first < n) return std::nullopt;
      return carve(by_pos_.find(by_size_.rbegin()->second), n);
    }
  }
  return std::nullopt;
}

void FreeRanges::give(uint64_t pos, uint64_t n) {
  if (n == 0) fail("rpipe heap: a free of 0 bytes at ", pos);
  if (pos >= total_bytes() || n > total_bytes() - pos || !same_segment(pos, pos + n - 1))
    fail("rpipe heap: [", pos, ", +", n, ") is not inside one of the heap's ", segments_, " segments of ", segment_bytes_, " bytes");
  auto next = by_pos_.lower_bound(pos);
  if (next != by_pos_.end() && next->first < pos + n) fail("rpipe heap: [", pos, ", +", n, ") is free already (double free?)");
  uint64_t start = pos, len = n;
  if (next != by_pos_.begin()) {
    auto prev = std::prev(next);
    const uint64_t prev_end = prev->first + prev->second;
    if (prev_end > pos) fail("rpipe heap: [", pos, ", +", n, ") is free already (double free?)");
    if (prev_end == pos && same_segment(prev->first, pos)) {
      start = prev->first;
      len += prev->second;
      erase(prev);
    }
  }
  if (next != by_pos_.end() && next->first == pos + n && same_segment(pos, next->first)) {
    len += next->second;
    erase(next);
  }
  insert(start, len);
  free_ += n;
}

const char* to_string(Mode m) { return m == Mode::HalfDuplex ? "half-duplex" : m == Mode::FullDuplex ? "full-duplex" : "?"; }
const char* to_string(Fit f) {
  switch (f) {
    case Fit::Next: return "next";
    case Fit::Best: return "best";
    case Fit::Worst: return "worst";
  }
  return "?";
}
const char* to_string(Sync s) { return s == Sync::Deferred ? "deferred" : s == Sync::Immediate ? "immediate" : "?"; }

}  // namespace loom::rpipe
