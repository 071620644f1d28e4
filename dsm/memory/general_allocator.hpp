#pragma once
// Offset-space allocator with first-, next-, best- and worst-fit placement and coalescing on
// free (seed 000 §4.2 general allocator; seed 002 rmalloc heuristics). Its bookkeeping lives
// outside the managed memory: registered memory is writable by peers, so allocator metadata
// inside it could be corrupted from the wire.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace loom::memory {

enum class Fit { First, Next, Best, Worst };
const char* to_string(Fit f);
Fit parse_fit(const std::string& s);

class GeneralAllocator {
 public:
  GeneralAllocator(uint64_t size, Fit fit, uint64_t alignment = 64);

  // Returns the offset of a block of at least n bytes, or nullopt when nothing fits.
  std::optional<uint64_t> allocate(uint64_t n);
  // Throws loom::Error for an offset that is not the start of an allocated block.
  void free(uint64_t offset);
  // The size of the allocated block starting at offset, or nullopt.
  std::optional<uint64_t> block_size(uint64_t offset) const;

  uint64_t capacity() const { return size_; }
  uint64_t free_bytes() const { return free_bytes_; }
  size_t free_blocks() const { return by_offset_.size(); }
  uint64_t largest_free() const;
  size_t allocated_blocks() const { return used_.size(); }
  Fit fit() const { return fit_; }

 private:
  void insert_free(uint64_t off, uint64_t len);
  void erase_free(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t size_;
  Fit fit_;
  uint64_t align_;
  uint64_t free_bytes_;
  uint64_t rover_ = 0;  // next-fit: where the last search ended
  std::map<uint64_t, uint64_t> by_offset_;        // free: offset -> length
  std::set<std::pair<uint64_t, uint64_t>> by_size_;  // free: (length, offset)
  std::map<uint64_t, uint64_t> used_;             // allocated: offset -> length
};

}  // namespace loom::memory
