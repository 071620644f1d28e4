#pragma once
// Write notices (seed 003 "hybrid invalidation"): (block, last releaser, write timestamp)
// records that synchronization objects carry from releasers to acquirers. A process keeps the
// notices it knows in a bounded buffer. When it overflows, the oldest notices are coalesced into
// chunk notices (one per kChunkBlocks aligned blocks of a region: "some of these blocks have
// versions up to wts"), so an acquirer re-checks only the copies in the chunks written; only
// when coalescing does not make room (writes scattered over more chunks than the buffer holds)
// do the oldest fold into min_wts, the bound below which every copy must be checked again
// (docs/coherence.md, "Timestamps and write notices"). No global garbage collection is needed.
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
  bool claimed = false; // the release claimed the block: its public copy may be stale (ask first)
  // A chunk notice: key names the first of kChunkBlocks blocks, some of which were written with
  // versions up to wts (writer 0, not claimed: the versions' places are not known).
  bool chunk = false;
  uint64_t seq = 0;  // the buffer's change count when this entry last changed (not on the wire)
};
inline constexpr uint64_t kChunkBlocks = 64;
inline constexpr uint64_t chunk_key(uint64_t key) { return key & ~(kChunkBlocks - 1); }

// On the wire: a header and `count` 16-byte entries
// (key; wts << 16 | claimed << 15 | chunk << 14 | writer). Everything read from the wire is
// checked: writers inside the job, chunk notices aligned, with writer 0 and not claimed.
struct NoticeHeader {
  uint32_t magic = 0;
  uint32_t count = 0;
  uint64_t min_wts = 0;
};
inline constexpr uint32_t kNoticeMagic = 0x4c4e4f54;  // "LNOT"
inline constexpr size_t kNoticeBytes = 16;
inline constexpr uint64_t kNoticeWriterMask = 0x3fff, kNoticeChunk = 0x4000, kNoticeClaimed = 0x8000;
inline constexpr size_t notice_wire_bytes(size_t capacity) { return sizeof(NoticeHeader) + capacity * kNoticeBytes; }

class NoticeBuffer {
 public:
  explicit NoticeBuffer(size_t capacity) : cap_(capacity) { index_.reserve(capacity * 2); }

  // Records a notice; keeps the newest per block (and per chunk); folds the oldest on overflow.
  void add(const Notice& n);
  // Merges a serialized buffer. Returns false (and merges nothing) if the bytes are malformed.
  // Entries naming a writer >= nprocs are refused the same way.
  bool merge_wire(std::span<const uint8_t> bytes, uint32_t nprocs);
  void merge(const NoticeBuffer& other);
  // Serializes into out (at least wire_bytes()); returns the bytes written. The bytes are kept:
  // merging them back later is a no-op and is skipped.
  size_t serialize(uint8_t* out) const;
  // Serializes min_wts and only the entries changed after change count `since` (0: all of
  // them): what a receiver that merged everything serialized for it up to `since` lacks. The
  // bytes are not kept as the last serialization.
  size_t serialize_since(uint64_t since, uint8_t* out) const;
  // Counts changes of entries (added, raised, made by folding): entries with seq > a count
  // taken before changed after it.
  uint64_t changes() const { return seq_; }
  size_t wire_bytes() const { return notice_wire_bytes(entries_.size()); }

  uint64_t min_wts() const { return min_wts_; }
  void raise_min_wts(uint64_t t) {
    if (t > min_wts_) min_wts_ = t;
  }
  const std::vector<Notice>& entries() const { return entries_; }
  size_t capacity() const { return cap_; }
  void clear() { entries_.clear(), index_.clear(), chunk_index_.clear(), min_wts_ = 0; }

 private:
  void fold();
  void coalesce_into_chunks(size_t drop);
  void fold_into_bound(size_t drop);
  void reindex();
  // A block notice no newer than its chunk's notice: the chunk notice makes an acquirer re-check
  // every copy it could name.
  bool covered_by_chunk(const Notice& n) const;
  void drop_covered_by(Notice chunk);  // a copy: entries_ moves under it
  // The oldest `drop` entries (of the block notices only, or of all) to the front.
  void oldest_first(size_t drop, bool blocks_only);
  size_t write_wire(uint64_t since, uint8_t* out) const;
  size_t cap_;
  uint64_t seq_ = 0;
  uint64_t min_wts_ = 0;
  std::vector<Notice> entries_;
  std::unordered_map<uint64_t, size_t> index_;        // block notices by key
  std::unordered_map<uint64_t, size_t> chunk_index_;  // chunk notices by key
  mutable std::vector<uint8_t> last_wire_;             // the last serialization
};

}  // namespace loom::coherence
