#include "coherence/notices.hpp"

#include <algorithm>
#include <cstring>

namespace loom::coherence {

void NoticeBuffer::add(const Notice& n) {
  auto it = index_.find(n.key);
  if (it != index_.end()) {
    Notice& e = entries_[it->second];
    if (n.wts > e.wts) e = n;
    return;
  }
  if (n.wts <= min_wts_) return;  // already covered by the lease bound
  index_.emplace(n.key, entries_.size());
  entries_.push_back(n);
  if (entries_.size() > cap_) fold();
}

void NoticeBuffer::fold() {
  // Keep the newest `cap_ * 3 / 4` notices; the dropped ones raise min_wts, so an acquirer that
  // no longer sees them re-checks every copy they could have named. Folding a quarter at a time
  // keeps the cost amortized.
  size_t keep = cap_ - cap_ / 4;
  std::nth_element(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(entries_.size() - keep), entries_.end(),
                   [](const Notice& a, const Notice& b) { return a.wts < b.wts; });
  size_t drop = entries_.size() - keep;
  for (size_t i = 0; i < drop; ++i) min_wts_ = std::max(min_wts_, entries_[i].wts);
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(drop));
  // Notices at or below the new bound add nothing.
  std::erase_if(entries_, [&](const Notice& n) { return n.wts <= min_wts_; });
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].key, i);
}

bool NoticeBuffer::merge_wire(std::span<const uint8_t> bytes, uint32_t nprocs) {
  NoticeHeader h;
  if (bytes.size() < sizeof h) return false;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic == 0 && h.count == 0 && h.min_wts == 0) return true;  // never written: nothing to carry
  if (h.magic != kNoticeMagic || h.count > (bytes.size() - sizeof h) / kNoticeBytes) return false;
  const uint8_t* p = bytes.data() + sizeof h;
  for (uint32_t i = 0; i < h.count; ++i) {
    uint64_t key, tw;
    std::memcpy(&key, p + i * kNoticeBytes, 8);
    std::memcpy(&tw, p + i * kNoticeBytes + 8, 8);
    if ((tw & 0xffff) >= nprocs) return false;
  }
  raise_min_wts(h.min_wts);
  for (uint32_t i = 0; i < h.count; ++i) {
    uint64_t key, tw;
    std::memcpy(&key, p + i * kNoticeBytes, 8);
    std::memcpy(&tw, p + i * kNoticeBytes + 8, 8);
    add(Notice{key, tw >> 16, static_cast<uint32_t>(tw & 0xffff)});
  }
  return true;
}

void NoticeBuffer::merge(const NoticeBuffer& other) {
  raise_min_wts(other.min_wts_);
  for (const Notice& n : other.entries_) add(n);
}

size_t NoticeBuffer::serialize(uint8_t* out) const {
  NoticeHeader h{kNoticeMagic, static_cast<uint32_t>(entries_.size()), min_wts_};
  std::memcpy(out, &h, sizeof h);
  uint8_t* p = out + sizeof h;
  for (const Notice& n : entries_) {
    uint64_t tw = (n.wts << 16) | n.writer;
    std::memcpy(p, &n.key, 8);
    std::memcpy(p + 8, &tw, 8);
    p += kNoticeBytes;
  }
  return static_cast<size_t>(p - out);
}

}  // namespace loom::coherence
