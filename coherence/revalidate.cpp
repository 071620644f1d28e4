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
// Rounds a batch takes at most. Two processes that acquire together often revalidate the same
// entries (the same chunk notice reached both through one barrier) and race to extend their
// leases: the CAS that loses reads the entry again instead of dropping a valid copy to a fault.
constexpr int kRevalidationRounds = 8;
}  // namespace

// fence.mu held; timestamp policies only (entries of 16 bytes).
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
  for (int round = 0; round < kRevalidationRounds; ++round) {
    // 1. Every entry still to be read, in one pipelined batch.
    for (size_t i = 0; i < batch.size(); ++i) {
      const Suspect& s = batch[i];
      if (s.step != Suspect::Step::Read) continue;
      const int mgr = s.rs->r->manager(s.m->block);
      l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory + 16 * i, 16, s.rs->dir_addr(mgr, s.m->block), s.rs->rkey(mgr));
    }
    l.wait();
    if (judge_entries(l, batch)) l.wait();
    if (!settle_suspects(lane, batch, round + 1 == kRevalidationRounds)) return;
  }
}

// 2. Copies whose version is still the entry's: adopt a lease that covers the bound, or ask for
// one with a CAS from the word just read (a successful CAS is itself a validation). The others
// are to be dropped, aimed at the version the entry names (or, while it is locked or exclusive,
// at the entry). Returns whether a CAS was posted.
bool Space::Impl::judge_entries(Lane& l, std::span<Suspect> batch) {
  bool posted = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    Suspect& s = batch[i];
    if (s.step != Suspect::Step::Read) continue;
    BlockMeta& m = *s.m;
    const size_t off = Scratch::kDirectory + 16 * i;
    const DirWord w{l.word(off)};
    uint64_t wts;
    std::memcpy(&wts, l.bytes(off + 8), 8);
    std::lock_guard<std::mutex> g(m.mu);
    s.step = Suspect::Step::Drop;
    if (m.state != State::Clean || m.rts >= s.bound) continue;  // changed meanwhile: settled in step 3
    if (w.locked() || w.exclusive() || wts != m.data_wts || w.home() >= n) {
      const bool named = !w.locked() && !w.exclusive() && w.home() < n && wts > m.data_wts;
      if (named) m.hint_home = w.home();
      m.hint_wts = named ? wts : kUnknownWts;
      continue;
    }
    s.word = w;
    if (w.rts() >= s.bound) {
      s.step = Suspect::Step::Keep;
      continue;
    }
    const uint64_t want = std::max(wts, s.bound) + lease;
    const int mgr = s.rs->r->manager(m.block);
    l.post(mgr, fabric::Opcode::CompareSwap, Scratch::kBlock + 8 * i, 8, s.rs->dir_addr(mgr, m.block), s.rs->rkey(mgr), w.raw,
           w.with_rts(want).raw);
    s.step = Suspect::Step::Extending;
    posted = true;
  }
  return posted;
}

// 3. Keep what validated; drop the rest. An extension that lost its CAS reads the entry again
// in the next round (its copy is dropped in the last). Returns whether any is to be read again.
bool Space::Impl::settle_suspects(std::optional<LaneGuard>& lane, std::span<Suspect> batch, bool last_round) {
  Lane& l = **lane;
  bool again = false;
  InvalidationRun dropped(*this);
  for (size_t i = 0; i < batch.size(); ++i) {
    Suspect& s = batch[i];
    if (s.step == Suspect::Step::Settled || s.step == Suspect::Step::Read) continue;
    BlockMeta& m = *s.m;
    dropped.before_lock(*s.rs, m.block);
    std::unique_lock<std::mutex> g(m.mu);
    const Suspect::Step step = s.step;
    s.step = Suspect::Step::Settled;
    if (m.state == State::Invalid || m.rts >= s.bound) continue;
    bool keep = step == Suspect::Step::Keep;
    if (step == Suspect::Step::Extending) {
      keep = l.word(Scratch::kBlock + 8 * i) == s.word.raw;
      if (!keep && !last_round && m.state == State::Clean) {
        s.step = Suspect::Step::Read;
        again = true;
        continue;
      }
      s.word = s.word.with_rts(std::max(m.data_wts, s.bound) + lease);
    }
    if (keep && m.state == State::Clean) {
      m.rts = s.word.rts();
      m.word0 = s.word;
      stats.revalidations.fetch_add(1, std::memory_order_relaxed);
    } else {
      dropped.drop(lane, *s.rs, m, g);
    }
  }
  dropped.close();
  return again;
}

}  // namespace loom::coherence
