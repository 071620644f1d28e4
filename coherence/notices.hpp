#pragma once
// Write notices (seed 003 "hybrid invalidation"): (block, last releaser, write timestamp)
// records that synchronization objects carry from releasers to acquirers. A process keeps the
// notices it knows in a bounded buffer; when it overflows, the oldest notices are dropped and
// their timestamps fold into min_wts, the logical-lease bound below which every copy must be
// checked again. No global garbage collection is needed.
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace loom::coherence {

struct Notice {
  uint64_t key = 0;     // region id << 32 | block
  uint64_t wts = 0;     // write timestamp of the version the writer published
  uint32_t writer = 0;  // the last releaser: its public copy holds that version (fast read)
};

// On the wire: a header and `count` 16-byte entries. Everything read from the wire is checked.
struct NoticeHeader {
  uint32_t magic = 0;
  uint32_t count = 0;
  uint64_t min_wts = 0;
};
inline constexpr uint32_t kNoticeMagic = 0x4c4e4f54;  // "LNOT"
inline constexpr size_t kNoticeBytes = 16;
inline constexpr size_t notice_wire_bytes(size_t capacity) { return sizeof(NoticeHeader) + capacity * kNoticeBytes; }

class NoticeBuffer {
 public:
  explicit NoticeBuffer(size_t capacity) : cap_(capacity) { index_.reserve(capacity * 2); }

  // Records a notice; keeps the newest per block; folds the oldest on overflow.
  void add(const Notice& n);
  // Merges a serialized buffer. Returns false (and merges nothing) if the bytes are malformed.
  // Entries naming a writer >= nprocs are refused the same way.
  bool merge_wire(std::span<const uint8_t> bytes, uint32_t nprocs);
  void merge(const NoticeBuffer& other);
  // Serializes into out (at least wire_bytes()); returns the bytes written.
  size_t serialize(uint8_t* out) const;
  size_t wire_bytes() const { return notice_wire_bytes(entries_.size()); }

  uint64_t min_wts() const { return min_wts_; }
  void raise_min_wts(uint64_t t) { if (t > min_wts_) min_wts_ = t; }
  const std::vector<Notice>& entries() const { return entries_; }
  size_t capacity() const { return cap_; }
  void clear() { entries_.clear(); index_.clear(); min_wts_ = 0; }

 private:
  void fold();
  size_t cap_;
  uint64_t min_wts_ = 0;
  std::vector<Notice> entries_;
  std::unordered_map<uint64_t, size_t> index_;
};

}  // namespace loom::coherence
