// Pipelined misses (docs/coherence.md, "Read miss"): an explicit access to many blocks reads the
// invalid ones in batches — every block's data in one pipelined batch of READs (none for a copy
// that still holds the version aimed at: an expired lease), then every entry in another, which
// validates each block as fetch() validates one. A block that does not
// validate at once (entry locked, exclusive or moved on, or a lease that moved while we
// extended it) stays invalid, and the caller's fetch() takes it as before. Leases too short are
// extended by a third batch, of CASes. The cost is two or three round trips per batch instead of
// two or three per block.
#include <algorithm>
#include <optional>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

void Space::Impl::prefetch(Lane& l, RegionState& rs, size_t begin, size_t end) {
  const size_t cap = prefetch_cap(rs);
  HeldBlocks held;  // the batch's blocks, ascending
  PrefetchBatch batch;
  for (size_t b = begin; b < end; ++b) {
    BlockMeta& m = rs.meta[b];
    if (m.state != State::Invalid) continue;  // a racy peek, confirmed under the mutex
    std::unique_lock<std::mutex> g(m.mu);
    if (m.state != State::Invalid) continue;
    batch.push_back(aim(rs, m));
    held.push_back(std::move(g));
    if (batch.size() < cap) continue;
    prefetch_batch(l, rs, batch);
    batch.clear();
    held.clear();
  }
  if (!batch.empty()) prefetch_batch(l, rs, batch);
}

// Block m (its mutex held) aimed at the newest version its hints name. A copy that still holds
// that version (an expired lease) needs its entry only.
Space::Impl::Prefetch Space::Impl::aim(const RegionState& rs, BlockMeta& m) const {
  const bool have = m.hint_wts != kUnknownWts && m.data_wts == m.hint_wts;
  return Prefetch{&m, fixed_home ? rs.r->manager(m.block) : m.hint_home, m.hint_wts, true, have};
}

// Blocks whose version is unknown (an invalidation flag) aim at what their entries say, read in
// one batch; a block whose entry is locked, exclusive or atomic is left to fetch().
void Space::Impl::aim_unknown(Lane& l, RegionState& rs, PrefetchBatch& batch) {
  bool any = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].wts != kUnknownWts) continue;
    const size_t b = batch[i].m->block;
    const int mgr = rs.r->manager(b);
    l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory + i * entry_slot(), dir_read_bytes(), rs.dir_addr(mgr, b), rs.rkey(mgr));
    any = true;
  }
  if (!any) return;
  l.wait();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].wts != kUnknownWts) continue;
    const DirView d = dir_view(l, rs, batch[i].m->block, Scratch::kDirectory + i * entry_slot());
    batch[i].ok = !d.word0.locked() && !d.word0.exclusive() && !d.word0.atomic();
    batch[i].home = fixed_home ? rs.r->manager(batch[i].m->block) : d.word0.home();
    batch[i].wts = d.wts;
  }
}

// The batch's validated blocks whose leases are too short get longer ones, by CASes in one
// pipelined batch (each CAS names the entry word its block validated against). A CAS that
// misses (a release or another reader moved the entry) leaves its block to fetch().
void Space::Impl::extend_leases(Lane& l, RegionState& rs, PrefetchBatch& batch, std::span<DirView> views) {
  static_assert(kMaxPrefetch * 8 <= Scratch::kBlock - Scratch::kBatchCas);
  std::array<std::optional<DirWord>, kMaxPrefetch> want{};
  bool any = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].ok) continue;
    const size_t b = batch[i].m->block;
    want[i] = longer_lease(rs, b, views[i], views[i].wts);
    if (!want[i]) continue;
    const int mgr = rs.r->manager(b);
    l.post(mgr, fabric::Opcode::CompareSwap, Scratch::kBatchCas + 8 * i, 8, rs.dir_addr(mgr, b), rs.rkey(mgr), views[i].word0.raw, want[i]->raw);
    any = true;
  }
  if (!any) return;
  l.wait();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!want[i]) continue;
    if (l.word(Scratch::kBatchCas + 8 * i) == views[i].word0.raw) views[i].word0 = *want[i];
    else batch[i].ok = false;
  }
}

// A block whose entry names another version than the one aimed at (a notice older than the
// entry, or a release since) aims at the entry's version in the next round, as fetch() would.
void Space::Impl::prefetch_batch(Lane& l, RegionState& rs, PrefetchBatch& batch) {
  aim_unknown(l, rs, batch);
  for (int round = 1; prefetch_round(l, rs, batch) && round < kPrefetchRounds; ++round) {
  }
}

// One round: the data, then (after every data READ completed) the entries that validate it.
// Directory policy: the sharer bytes go first, on the entries' queue pairs (a releaser that
// locks an entry after our validating read sees us and invalidates our copy). True when some
// block is to be tried again, aimed at what its entry said.
bool Space::Impl::prefetch_round(Lane& l, RegionState& rs, PrefetchBatch& batch) {
  const size_t bs = rs.r->block_size(), entry = entry_slot();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].ok) continue;
    const size_t b = batch[i].m->block;
    if (dir_mode) post_join_sharers(l, rs, b);
    if (!batch[i].have)
      l.post(batch[i].home, fabric::Opcode::Read, Scratch::kBlock + i * bs, static_cast<uint32_t>(bs), rs.pub_addr(batch[i].home, b), rs.rkey(batch[i].home));
  }
  l.wait();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].ok) continue;
    const size_t b = batch[i].m->block;
    const int mgr = rs.r->manager(b);
    l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory + i * entry, dir_read_bytes(), rs.dir_addr(mgr, b), rs.rkey(mgr));
  }
  l.wait();
  std::array<DirView, kMaxPrefetch> views{};
  std::array<bool, kMaxPrefetch> again{};
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].ok) continue;
    const DirView& d = views[i] = dir_view(l, rs, batch[i].m->block, Scratch::kDirectory + i * entry);
    if (names_version(d, batch[i].home, batch[i].wts)) continue;
    batch[i].ok = false;  // locked, exclusive or atomic: fetch() takes it
    again[i] = !d.word0.locked() && !d.word0.exclusive() && !d.word0.atomic();
  }
  if (!dir_mode) extend_leases(l, rs, batch, views);
  install_prefetched(l, rs, batch, views);
  bool any = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!again[i]) continue;
    Prefetch& p = batch[i];
    p.home = fixed_home ? rs.r->manager(p.m->block) : views[i].word0.home();
    p.wts = views[i].wts;
    p.have = p.m->data_wts == p.wts;
    p.ok = any = true;
  }
  return any;
}

// The validated blocks of a round become Clean copies (and leave the batch).
void Space::Impl::install_prefetched(Lane& l, RegionState& rs, PrefetchBatch& batch, std::span<const DirView> views) {
  const size_t bs = rs.r->block_size();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].ok) continue;
    batch[i].ok = false;
    BlockMeta& m = *batch[i].m;
    const DirView& d = views[i];
    if (batch[i].have) {
      stats.revalidations.fetch_add(1, std::memory_order_relaxed);
    } else {
      const bool fast = batch[i].home != m.word0.home();
      fill_runtime_block(rs, m.block, l.bytes(Scratch::kBlock + i * bs));
      stats.read_misses.fetch_add(1, std::memory_order_relaxed);
      if (fast) stats.fast_reads.fetch_add(1, std::memory_order_relaxed);
      stats.bytes_fetched.fetch_add(bs, std::memory_order_relaxed);
    }
    take_copy(rs, m, d, d.wts);  // Invalid again (data kept) when the lease floor passed it: fetch() revalidates
  }
}

}  // namespace loom::coherence
