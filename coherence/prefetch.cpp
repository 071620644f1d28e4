// Pipelined misses (docs/coherence.md, "Read miss"): an explicit access to many blocks reads the
// invalid ones in batches — every block's data in one pipelined batch of READs (none for a copy
// that still holds the version aimed at: an expired lease), then every entry in another, which
// validates each block as fetch() validates one. A block that does not
// validate at once (entry locked, exclusive or moved on, or a lease that moved while we
// extended it) stays invalid, and the caller's fetch() takes it as before. The cost is two
// round trips per batch instead of one or two per block.
#include <algorithm>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

void Space::Impl::prefetch(Lane& l, RegionState& rs, size_t begin, size_t end) {
  const size_t cap = std::min({kMaxPrefetch, kMaxBlock / rs.r->block_size(), (Scratch::kWtsRing - Scratch::kDirectory) / entry_slot()});
  std::vector<std::unique_lock<std::mutex>> held;  // the batch's blocks, ascending
  std::vector<Prefetch> batch;
  for (size_t b = begin; b < end; ++b) {
    BlockMeta& m = rs.meta[b];
    if (m.state != State::Invalid) continue;  // a racy peek, confirmed under the mutex
    std::unique_lock<std::mutex> g(m.mu);
    if (m.state != State::Invalid) continue;
    // A copy that still holds the version aimed at (an expired lease) needs its entry only.
    const bool have = m.hint_wts != kUnknownWts && m.data_wts == m.hint_wts;
    batch.push_back(Prefetch{&m, fixed_home ? rs.r->manager(b) : m.hint_home, m.hint_wts, true, have});
    held.push_back(std::move(g));
    if (batch.size() < cap) continue;
    prefetch_batch(l, rs, batch);
    batch.clear();
    held.clear();
  }
  if (!batch.empty()) prefetch_batch(l, rs, batch);
}

// Blocks whose version is unknown (an invalidation flag) aim at what their entries say, read in
// one batch; a block whose entry is locked, exclusive or atomic is left to fetch().
void Space::Impl::aim_unknown(Lane& l, RegionState& rs, std::vector<Prefetch>& batch) {
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

void Space::Impl::prefetch_batch(Lane& l, RegionState& rs, std::vector<Prefetch>& batch) {
  aim_unknown(l, rs, batch);
  const size_t bs = rs.r->block_size(), entry = entry_slot();
  // The data, then (after every data READ completed) the entries that validate it. Directory
  // policy: the sharer bytes go first, on the entries' queue pairs (a releaser that locks an
  // entry after our validating read sees us and invalidates our copy).
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
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].ok) continue;
    BlockMeta& m = *batch[i].m;
    DirView d = dir_view(l, rs, m.block, Scratch::kDirectory + i * entry);
    const bool same = names_version(d, batch[i].home, batch[i].wts);
    if (!same || (!dir_mode && !extend_lease(l, rs, m.block, d, d.wts))) continue;  // fetch() takes it
    if (batch[i].have) {
      st_reval.fetch_add(1, std::memory_order_relaxed);
    } else {
      const bool fast = batch[i].home != m.word0.home();
      fill_runtime_block(rs, m.block, l.bytes(Scratch::kBlock + i * bs));
      st_misses.fetch_add(1, std::memory_order_relaxed);
      if (fast) st_fast.fetch_add(1, std::memory_order_relaxed);
      st_fetched.fetch_add(bs, std::memory_order_relaxed);
    }
    take_copy(rs, m, d, d.wts);  // Invalid again (data kept) when the lease floor passed it: fetch() revalidates
  }
}

}  // namespace loom::coherence
