#pragma once
// The free space of a pipe's heap and the three fits over it (seed 002: next, best, worst). A
// heap is segments of equal size; a position is segment * segment_bytes + offset, and ranges
// never cross a segment's end (two segments side by side in positions are not side by side in
// memory). Kept by whichever end keeps the heap's state (types.hpp, Sync). Not thread-safe.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "loom/rpipe/types.hpp"

namespace loom::rpipe {

class FreeRanges {
 public:
  FreeRanges(Fit fit, uint64_t segment_bytes);

  // Makes segment `s` (its whole range) free; segments are added in order 0, 1, ...
  void add_segment(uint32_t s);
  // A free range of `n` bytes chosen by the fit, taken; nullopt if none holds `n`.
  std::optional<uint64_t> take(uint64_t n);
  // Gives [pos, pos+n) back, coalesced with free neighbours in its segment. Fails if any of it is
  // free already or it lies outside the segments (a double free, or bytes never handed out).
  void give(uint64_t pos, uint64_t n);

  uint64_t free_bytes() const { return free_; }
  uint64_t total_bytes() const { return static_cast<uint64_t>(segments_) * segment_bytes_; }
  uint32_t segments() const { return segments_; }
  size_t ranges() const { return by_pos_.size(); }
  uint64_t largest() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }
  uint64_t segment_bytes() const { return segment_bytes_; }
  Fit fit() const { return fit_; }

 private:
  using BySize = std::set<std::pair<uint64_t, uint64_t>>;  // (length, position)
  std::optional<uint64_t> take_next(uint64_t n);
  std::map<uint64_t, uint64_t>::iterator first_fit_from(std::map<uint64_t, uint64_t>::iterator it,
                                                        std::map<uint64_t, uint64_t>::iterator end, uint64_t n);
  uint64_t carve(std::map<uint64_t, uint64_t>::iterator it, uint64_t n);  // takes n from the range's start
  void insert(uint64_t pos, uint64_t len);
  void erase(std::map<uint64_t, uint64_t>::iterator it);
  bool same_segment(uint64_t a, uint64_t b) const { return a / segment_bytes_ == b / segment_bytes_; }

  Fit fit_;
  uint64_t segment_bytes_;
  uint32_t segments_ = 0;
  uint64_t free_ = 0;
  uint64_t cursor_ = 0;  // next fit: where the last allocation ended
  std::map<uint64_t, uint64_t> by_pos_;  // position -> length
  BySize by_size_;
};

}  // namespace loom::rpipe
