// Fault runs (docs/coherence.md, "Fault runs"): a fault on block b also opens the blocks after b
// that the same interval touched the last time — for a write, the following blocks published by
// the same release as b; for a read, the following blocks fetched by read faults of the same
// interval as b. The blocks of the run that are invalid are fetched in one pipelined batch
// (prefetch.cpp), the run is twinned (write) and opened with one mprotect, as an explicit access
// opens its blocks (read_path.cpp, declare). A program that sweeps an array then pays one fault
// and one page-table change per run instead of one per block; a block opened for a write the
// program does not make publishes an empty diff at the next release.
#include <algorithm>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

// The largest batch prefetch_batch takes: the lane's staging buffer and its directory slots.
size_t Space::Impl::prefetch_cap(const RegionState& rs) const {
  return std::min({kMaxPrefetch, kMaxBlock / rs.r->block_size(), (Scratch::kWtsRing - Scratch::kDirectory) / entry_slot()});
}

// The blocks after b with b's key, Invalid or Clean (and closed, for a read), their mutexes held (ascending, after b's:
// the lock order). A block another thread holds ends the run rather than being waited for.
Space::Impl::HeldBlocks Space::Impl::lock_run_after(RegionState& rs, size_t b, bool write, uint32_t key) {
  HeldBlocks run;
  const size_t end = std::min(rs.r->blocks(), b + prefetch_cap(rs));
  for (size_t x = b + 1; x < end; ++x) {
    BlockMeta& m = rs.meta[x];
    const State peek = m.state;  // confirmed under the mutex
    if (peek != State::Invalid && peek != State::Clean) break;
    std::unique_lock<std::mutex> g(m.mu, std::try_to_lock);
    if (!g.owns_lock() || (m.state != State::Invalid && m.state != State::Clean)) break;
    if ((write ? m.written_in : m.read_in) != key) break;
    // A read run stops at a block already readable: it would not have faulted.
    if (!write && rs.r->protection(x) != region::Protection::None) break;
    run.push_back(std::move(g));
  }
  return run;
}

// The run's invalid blocks (b+1 ... b+run.size()) fetched in one batch; the run then ends before
// the first block still invalid (its entry locked, exclusive or moved on: its own fault fetches
// it later).
void Space::Impl::fetch_run(Lane& l, RegionState& rs, size_t b, HeldBlocks& run) {
  PrefetchBatch batch;
  for (size_t i = 0; i < run.size(); ++i) {
    BlockMeta& m = rs.meta[b + 1 + i];
    if (m.state != State::Invalid) continue;
    batch.push_back(aim(rs, m));
  }
  if (!batch.empty()) prefetch_batch(l, rs, batch);
  size_t k = 0;
  while (k < run.size() && rs.meta[b + 1 + k].state == State::Clean) ++k;
  run.resize(k);  // unlocks the rest
}

// Opens block m (its mutex held by the fault, Clean now) with the run after it. False when there
// is no run: the caller opens m alone.
bool Space::Impl::fault_run(Lane& l, RegionState& rs, BlockMeta& m, bool write, uint32_t key) {
  if (!cfg.fault_runs || key == 0) return false;
  HeldBlocks run = lock_run_after(rs, m.block, write, key);
  if (!run.empty()) fetch_run(l, rs, m.block, run);
  if (run.empty()) return false;
  const size_t b = m.block, k = run.size();
  if (write) {
    for (size_t x = b; x <= b + k; ++x) twin_block(rs, rs.meta[x]);
    for (size_t x = b + 1; x <= b + k; ++x) rs.meta[x].by_run = true;
    std::lock_guard<std::mutex> g(dirty.mu);  // listed and opened as one step, as make_dirty does
    for (size_t x = b; x <= b + k; ++x) dirty.list.push_back(rs.meta[x]);
    rs.r->protect(b, k + 1, region::Protection::ReadWrite);
  } else {
    for (size_t x = b; x <= b + k; ++x) opened_for_read(rs.meta[x]);
    rs.r->protect(b, k + 1, region::Protection::Read);
  }
  stats.run_blocks.fetch_add(run.size(), std::memory_order_relaxed);
  return true;
}

}  // namespace loom::coherence
