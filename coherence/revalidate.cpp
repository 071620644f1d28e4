// Revalidation in bulk (docs/coherence.md, "Acquire", step 2): when the lease bound passes the
// leases of clean copies, their directory entries are read in one pipelined batch instead of
// dropping every copy to a fault and a revalidation each. A copy whose entry still names its
// version keeps going, with the entry's lease or (one more batch of CASes) an extended one; the
// others are dropped as before. The cost is a few round trips for the whole cache instead of a
// fault per block.
#include <algorithm>
#include <cstring>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

namespace {
// Entries read per batch: the lane's directory area holds this many 16-byte entries.
constexpr size_t kBatch = (Scratch::kWtsRing - Scratch::kDirectory) / 16;
// CAS results go to the staging area, 8 bytes each.
static_assert(kBatch * 8 <= kMaxBlock);
}  // namespace

// fence_mu held; timestamp policies only (entries of 16 bytes).
void Space::Impl::revalidate_expired(std::optional<LaneGuard>& lane, std::vector<Suspect>& suspects) {
  for (size_t first = 0; first < suspects.size(); first += kBatch) {
    const size_t count = std::min(kBatch, suspects.size() - first);
    std::span<Suspect> batch(suspects.data() + first, count);
    revalidate_batch(lane, batch);
  }
}

void Space::Impl::revalidate_batch(std::optional<LaneGuard>& lane, std::span<Suspect> batch) {
  if (!lane) lane.emplace(lanes);
  Lane& l = **lane;
  // 1. Every entry, in one pipelined batch.
  for (size_t i = 0; i < batch.size(); ++i) {
    const Suspect& s = batch[i];
    const int mgr = s.rs->r->manager(s.m->block);
    l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory + 16 * i, 16, s.rs->dir_addr(mgr, s.m->block), s.rs->rkey(mgr));
  }
  l.wait();
  // 2. Copies whose version is still the entry's: adopt a lease that covers the bound, or ask for
  // one with a CAS from the word just read (a successful CAS is itself a validation). The
  // others are dropped, aimed at the version the entry names (or, while it is locked or
  // exclusive, at the entry).
  std::vector<uint8_t> extend(batch.size(), 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    BlockMeta& m = *batch[i].m;
    const size_t off = Scratch::kDirectory + 16 * i;
    const DirWord w{l.word(off)};
    uint64_t wts;
    std::memcpy(&wts, l.bytes(off + 8), 8);
    std::lock_guard<std::mutex> g(m.mu);
    batch[i].keep = false;
    const uint64_t bound = batch[i].bound;
    if (m.state != State::Clean || m.rts >= bound) continue;  // changed meanwhile: nothing to do
    if (w.locked() || w.exclusive() || wts != m.data_wts || w.home() >= n) {
      const bool named = !w.locked() && !w.exclusive() && w.home() < n && wts > m.data_wts;
      if (named) m.hint_home = w.home();
      m.hint_wts = named ? wts : kUnknownWts;
      continue;
    }
    batch[i].word = w;
    if (w.rts() >= bound) {
      batch[i].keep = true;
      continue;
    }
    const uint64_t want = std::max(wts, bound) + lease;
    const int mgr = batch[i].rs->r->manager(m.block);
    l.post(mgr, fabric::Opcode::CompareSwap, Scratch::kBlock + 8 * i, 8, batch[i].rs->dir_addr(mgr, m.block), batch[i].rs->rkey(mgr),
           w.raw, w.with_rts(want).raw);
    extend[i] = 1;
  }
  l.wait();
  // 3. Keep what validated; drop the rest.
  for (size_t i = 0; i < batch.size(); ++i) {
    Suspect& s = batch[i];
    BlockMeta& m = *s.m;
    std::lock_guard<std::mutex> g(m.mu);
    if (m.state == State::Invalid || m.rts >= s.bound) continue;
    if (extend[i] != 0) {
      const DirWord want = s.word.with_rts(std::max(m.data_wts, s.bound) + lease);
      s.keep = l.word(Scratch::kBlock + 8 * i) == s.word.raw;
      s.word = want;
    }
    if (s.keep && m.state == State::Clean) {
      m.rts = s.word.rts();
      m.word0 = s.word;
      st_reval.fetch_add(1, std::memory_order_relaxed);
    } else {
      drop(lane, *s.rs, m);
    }
  }
}

}  // namespace loom::coherence
