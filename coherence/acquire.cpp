// Acquire (docs/coherence.md, "Acquire"): applies what this process now knows — write notices
// newer than its copies, the lease bound below which folded notices may hide a write, and
// (directory policy) the invalidation flags other releasers set here.
#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

// fence.mu held.
void Space::Impl::acquire_locked(uint64_t incoming_min_wts) {
  std::optional<LaneGuard> lane;
  apply_notices(lane);
  apply_lease_bound(lane, incoming_min_wts);
  if (dir_mode) apply_invalidation_flags(lane);
}

// A notice newer than a copy drops the copy; the next miss goes straight to the last
// releaser's public copy (fast read).
void Space::Impl::apply_notices(std::optional<LaneGuard>& lane) {
  std::vector<Notice> fresh, chunks;
  {
    std::lock_guard<std::mutex> g(notices.mu);
    // Only the entries changed since the last acquire applied them: an entry applied before
    // left known_wts (or chunk_known) at its wts or above, and those only grow (every region is
    // installed everywhere before anyone writes to it, so no notice waited for its region).
    const uint64_t since = notices.applied;
    notices.applied = notices.buffer.changes();
    if (since == notices.applied) return;
    for (const Notice& e : notices.buffer.entries()) {
      if (e.seq <= since) continue;
      stats.notices.fetch_add(1, std::memory_order_relaxed);
      RegionState* rs = state_by_id(static_cast<uint32_t>(e.key >> 32));
      if (rs == nullptr) continue;  // a region destroyed since
      size_t b = e.key & 0xffffffffu;
      if (b >= rs->r->blocks()) continue;
      if (e.chunk) {
        chunks.push_back(e);
        continue;
      }
      if (e.wts <= rs->meta[b].known_wts.load(std::memory_order_relaxed)) continue;
      fresh.push_back(e);
    }
  }
  // In block order: the dropped copies close in runs.
  std::sort(fresh.begin(), fresh.end(), [](const Notice& a, const Notice& b) { return a.key < b.key; });
  InvalidationRun dropped(*this);
  for (const Notice& e : fresh) {
    RegionState* rs = state_by_id(static_cast<uint32_t>(e.key >> 32));
    BlockMeta& m = rs->meta[e.key & 0xffffffffu];
    dropped.before_lock(*rs, m.block);
    std::unique_lock<std::mutex> g(m.mu);
    if (e.wts <= m.known_wts.load(std::memory_order_relaxed)) continue;
    m.known_wts.store(e.wts, std::memory_order_relaxed);
    if (m.data_wts >= e.wts) continue;
    if (e.wts > m.hint_wts) {
      m.hint_home = static_cast<int>(e.writer);
      // A claimed version's public copy may be older than the owner's block: the entry is read
      // alone first (it says E, and the downgrade follows), so the data is read once.
      m.hint_wts = e.claimed ? kUnknownWts : e.wts;
    }
    dropped.drop(lane, *rs, m, g);
  }
  dropped.close();
  apply_chunk_notices(lane, chunks);
}

// A chunk notice (b, wts) stands for notices folded into it: each of blocks [b, b + kChunkBlocks)
// may have a version up to wts. A copy older than such a version has a lease that ended before
// it (rts < its wts <= wts), so copies of the chunk with rts < wts and data_wts < wts are
// suspect: dirty ones are released now, closed clean ones expire (expire_closed), open ones are
// revalidated in bulk against the bound wts.
// The cost follows the chunks written, not the cache.
void Space::Impl::apply_chunk_notices(std::optional<LaneGuard>& lane, const std::vector<Notice>& chunks) {
  std::vector<Suspect> suspects;
  for (const Notice& e : chunks) {
    RegionState* rs = state_by_id(static_cast<uint32_t>(e.key >> 32));
    const size_t first = e.key & 0xffffffffu, end = std::min<size_t>(first + kChunkBlocks, rs->r->blocks());
    // Applied before: every copy of the chunk was checked against this bound, or taken since
    // with a lease past it.
    std::atomic<uint64_t>& known = rs->chunk_known[first / kChunkBlocks];
    if (e.wts <= known.load(std::memory_order_relaxed)) continue;
    known.store(e.wts, std::memory_order_seq_cst);  // before the states are looked at (as fence.acq_ts)
    const uint64_t bound = std::max(e.wts, fence.acq_ts);
    for (size_t b = first; b < end; ++b) {
      BlockMeta& m = rs->meta[b];
      if (m.state == State::Invalid || m.state == State::Exclusive || m.state == State::Atomic) continue;
      std::lock_guard<std::mutex> g(m.mu);
      if (m.state != State::Clean && m.state != State::Dirty) continue;
      if (m.rts >= e.wts || m.data_wts >= e.wts) continue;
      if (m.state == State::Dirty) drop(lane, *rs, m);
      else if (!expire_closed(*rs, m)) suspects.push_back(Suspect{rs, &m, bound});
    }
  }
  revalidate_expired(lane, suspects);
}

// A copy only the explicit path reads (declare: its application view stays closed) is confirmed
// when it is next accessed, with one directory read, batched with its neighbours' (prefetch):
// an acquire whose bound passes many leases (an atomic word's release clock moves with every
// release anywhere) then reads no entry for copies nobody reads again. An open copy could be
// read by a plain load without a fault: it is revalidated now. mu held.
bool Space::Impl::expire_closed(RegionState& rs, BlockMeta& m) {
  if (rs.r->protection(m.block) != region::Protection::None) return false;
  m.state = State::Invalid;
  m.hint_wts = m.data_wts;
  m.hint_home = m.word0.home();
  return true;
}

// Notices were folded somewhere: every copy whose lease ended before the new bound is suspect.
// Dirty ones are released now; closed clean ones expire (expire_closed), open ones are
// revalidated in bulk (revalidate.cpp).
void Space::Impl::apply_lease_bound(std::optional<LaneGuard>& lane, uint64_t incoming_min_wts) {
  if (incoming_min_wts <= fence.acq_ts) return;
  // Before the states are looked at: a fetch installing a copy meanwhile sees the new floor
  // (read_path.cpp, floor_after_install) or is seen here.
  std::atomic_ref<uint64_t>(fence.acq_ts).store(incoming_min_wts, std::memory_order_seq_cst);
  std::vector<Suspect> suspects;
  for (auto& a : regions) {
    RegionState* rs = a.load(std::memory_order_acquire);
    if (rs == nullptr) continue;
    for (size_t b = 0; b < rs->r->blocks(); ++b) {
      BlockMeta& m = rs->meta[b];
      if (m.state == State::Invalid || m.state == State::Exclusive || m.state == State::Atomic) continue;
      std::lock_guard<std::mutex> g(m.mu);
      if ((m.state != State::Clean && m.state != State::Dirty) || m.rts >= fence.acq_ts) continue;
      if (m.state == State::Dirty) drop(lane, *rs, m);
      else if (!expire_closed(*rs, m)) suspects.push_back(Suspect{rs, &m, lease_floor(*rs, b)});
    }
  }
  revalidate_expired(lane, suspects);
}

// The flags are scanned only in regions whose counter moved, eight at a time.
void Space::Impl::apply_invalidation_flags(std::optional<LaneGuard>& lane) {
  InvalidationRun dropped(*this);
  for (auto& a : regions) {
    RegionState* rs = a.load(std::memory_order_acquire);
    if (rs == nullptr) continue;
    uint64_t c = rs->inval_counter().load(std::memory_order_acquire);
    if (c == rs->inval_seen) continue;
    rs->inval_seen = c;
    uint8_t* flags = rs->mem.bytes() + rs->flag_off;
    size_t nb = rs->r->blocks();
    for (size_t b = 0; b < nb; b += 8) {
      uint64_t w = 0;
      size_t k = std::min<size_t>(8, nb - b);
      std::memcpy(&w, flags + b, k);
      if (w == 0) continue;
      for (size_t j = 0; j < k; ++j) {
        if (std::atomic_ref<uint8_t>(flags[b + j]).exchange(0) == 0) continue;
        BlockMeta& m = rs->meta[b + j];
        dropped.before_lock(*rs, b + j);
        std::unique_lock<std::mutex> g(m.mu);
        m.hint_wts = kUnknownWts;  // the directory says which version to read
        dropped.drop(lane, *rs, m, g);
      }
    }
  }
  dropped.close();
}

size_t Space::Impl::serialize_notices(uint8_t* out) {
  std::lock_guard<std::mutex> g(notices.mu);
  return notices.buffer.serialize(out);
}

// What round k's partner of the barrier lacks: the entries changed since the last barrier sent
// it ours (it merged those: a barrier's rounds complete in order at both ends).
size_t Space::Impl::serialize_notices_for_round(int k, uint8_t* out) {
  std::lock_guard<std::mutex> g(notices.mu);
  uint64_t& sent = notices.sent[static_cast<size_t>(k)];
  const size_t len = notices.buffer.serialize_since(sent, out);
  sent = notices.buffer.changes();
  return len;
}

}  // namespace loom::coherence
