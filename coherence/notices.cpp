#include "loom/coherence/notices.hpp"

#include <algorithm>
#include <cstring>

namespace loom::coherence {

void NoticeBuffer::add(const Notice& n) {
  auto& index = n.chunk ? chunk_index_ : index_;
  auto it = index.find(n.key);
  if (it != index.end()) {
    Notice& e = entries_[it->second];
    if (n.wts <= e.wts) return;
    e = n;
    e.seq = ++seq_;
    if (n.chunk) drop_covered_by(n);
    return;
  }
  if (n.wts <= min_wts_ || covered_by_chunk(n)) return;  // already covered by the lease bound or a chunk
  index.emplace(n.key, entries_.size());
  entries_.push_back(n);
  entries_.back().seq = ++seq_;
  if (n.chunk) drop_covered_by(n);
  if (entries_.size() > cap_) fold();
}

// Block notices no newer than the chunk notice c add nothing but a hint (c is a copy: the
// entries move while they are erased).
void NoticeBuffer::drop_covered_by(const Notice c) {
  const size_t before = entries_.size();
  std::erase_if(entries_, [&](const Notice& n) { return !n.chunk && chunk_key(n.key) == c.key && n.wts <= c.wts; });
  if (entries_.size() != before) reindex();
}

// Makes room for a quarter of the buffer at a time, so the cost is amortized: the oldest block
// notices (a quarter of the buffer, or all there are) are coalesced into chunk notices; if that
// frees less than an eighth (the writes were scattered over many chunks), the oldest quarter of
// what remains, chunk notices included, folds into min_wts.
void NoticeBuffer::fold() {
  const size_t keep = cap_ - cap_ / 4;
  coalesce_into_chunks(entries_.size() - keep);
  if (entries_.size() + std::max<size_t>(1, cap_ / 8) > cap_) fold_into_bound(entries_.size() - keep);
}

void NoticeBuffer::oldest_first(size_t drop, bool blocks_only) {
  auto end = entries_.end();
  if (blocks_only) end = std::partition(entries_.begin(), entries_.end(), [](const Notice& n) { return !n.chunk; });
  drop = std::min(drop, static_cast<size_t>(end - entries_.begin()));
  std::nth_element(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(drop), end,
                   [](const Notice& a, const Notice& b) { return a.wts < b.wts; });
}

// The oldest `drop` block notices (or all there are) become, or raise, the notices of their
// chunks: an acquirer that no longer sees them re-checks the copies of those chunks whose leases
// ended before the chunk's wts, which covers every copy they could have named.
void NoticeBuffer::coalesce_into_chunks(size_t drop) {
  drop = std::min<size_t>(drop, std::count_if(entries_.begin(), entries_.end(), [](const Notice& n) { return !n.chunk; }));
  oldest_first(drop, true);
  // The chunks' wts after the merge: the dropped notices' and the chunk notices already here.
  struct Chunk {
    uint64_t wts = 0;
    bool here = false;  // a chunk notice for it is in the buffer already
  };
  std::unordered_map<uint64_t, Chunk> merged;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Notice& e = entries_[i];
    if (i >= drop && !e.chunk) continue;
    Chunk& c = merged[chunk_key(e.key)];
    c.wts = std::max(c.wts, e.wts);
    c.here = c.here || e.chunk;
  }
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(drop));
  // Raise the chunk notices here, drop the block notices they cover, then add the new chunks.
  std::erase_if(entries_, [&](Notice& n) {
    auto it = merged.find(chunk_key(n.key));
    if (it == merged.end()) return false;
    if (n.chunk && n.wts < it->second.wts) n.wts = it->second.wts, n.seq = ++seq_;
    return !n.chunk && n.wts <= it->second.wts;
  });
  for (const auto& [key, c] : merged)
    if (!c.here) entries_.push_back(Notice{key, c.wts, 0, false, true, ++seq_});
  reindex();
}

bool NoticeBuffer::covered_by_chunk(const Notice& n) const {
  if (n.chunk) return false;
  auto it = chunk_index_.find(chunk_key(n.key));
  return it != chunk_index_.end() && entries_[it->second].wts >= n.wts;
}

// The oldest `drop` notices raise min_wts: an acquirer that no longer sees them re-checks every
// copy whose lease ended before it.
void NoticeBuffer::fold_into_bound(size_t drop) {
  oldest_first(drop, false);
  for (size_t i = 0; i < drop; ++i) min_wts_ = std::max(min_wts_, entries_[i].wts);
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(drop));
  // Notices at or below the new bound add nothing.
  std::erase_if(entries_, [&](const Notice& n) { return n.wts <= min_wts_; });
  reindex();
}

void NoticeBuffer::reindex() {
  index_.clear();
  chunk_index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) (entries_[i].chunk ? chunk_index_ : index_).emplace(entries_[i].key, i);
}

bool NoticeBuffer::merge_wire(std::span<const uint8_t> bytes, uint32_t nprocs) {
  NoticeHeader h;
  if (bytes.size() < sizeof h) return false;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic == 0 && h.count == 0 && h.min_wts == 0) return true;  // never written: nothing to carry
  if (h.magic != kNoticeMagic || h.count > (bytes.size() - sizeof h) / kNoticeBytes) return false;
  // Our own last serialization (a lock this process released last): everything in it is known
  // here still (the buffer's knowledge only grows; folding keeps what it drops covered).
  const size_t len = sizeof h + size_t{h.count} * kNoticeBytes;
  if (len == last_wire_.size() && std::memcmp(bytes.data(), last_wire_.data(), len) == 0) return true;
  const uint8_t* p = bytes.data() + sizeof h;
  for (uint32_t i = 0; i < h.count; ++i) {
    uint64_t key, tw;
    std::memcpy(&key, p + i * kNoticeBytes, 8);
    std::memcpy(&tw, p + i * kNoticeBytes + 8, 8);
    if ((tw & kNoticeWriterMask) >= nprocs) return false;
    if ((tw & kNoticeChunk) != 0 && ((tw & (kNoticeWriterMask | kNoticeClaimed)) != 0 || key != chunk_key(key))) return false;
  }
  raise_min_wts(h.min_wts);
  for (uint32_t i = 0; i < h.count; ++i) {
    uint64_t key, tw;
    std::memcpy(&key, p + i * kNoticeBytes, 8);
    std::memcpy(&tw, p + i * kNoticeBytes + 8, 8);
    add(Notice{key, tw >> 16, static_cast<uint32_t>(tw & kNoticeWriterMask), (tw & kNoticeClaimed) != 0, (tw & kNoticeChunk) != 0});
  }
  return true;
}

void NoticeBuffer::merge(const NoticeBuffer& other) {
  raise_min_wts(other.min_wts_);
  for (const Notice& n : other.entries_) add(n);
}

size_t NoticeBuffer::serialize(uint8_t* out) const {
  const size_t len = write_wire(0, out);
  last_wire_.assign(out, out + len);
  return len;
}

size_t NoticeBuffer::serialize_since(uint64_t since, uint8_t* out) const { return write_wire(since, out); }

size_t NoticeBuffer::write_wire(uint64_t since, uint8_t* out) const {
  uint8_t* p = out + sizeof(NoticeHeader);
  uint32_t count = 0;
  for (const Notice& n : entries_) {
    if (n.seq <= since) continue;
    uint64_t tw = (n.wts << 16) | (n.claimed ? kNoticeClaimed : 0) | (n.chunk ? kNoticeChunk : 0) | n.writer;
    std::memcpy(p, &n.key, 8);
    std::memcpy(p + 8, &tw, 8);
    p += kNoticeBytes;
    ++count;
  }
  const NoticeHeader h{kNoticeMagic, count, min_wts_};
  std::memcpy(out, &h, sizeof h);
  return static_cast<size_t>(p - out);
}

}  // namespace loom::coherence
