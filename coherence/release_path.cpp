// The release path (docs/coherence.md, "Release", steps 1-7): for each dirty block, lock its
// directory entry, take the current master, merge this process's diff over it, invalidate the
// other sharers (directory policy), publish the new version (floating home: this process's
// public copy, and this process becomes the home), and record it in a write notice.
#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/coherence/diff.hpp"
#include "loom/coherence/race_report.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::coherence {

// Step 1: lock the directory entry, with one CAS when our last view of it is still right.
// `unchanged`: nobody published since our copy was taken (every release changes word0). An entry
// another process holds exclusively is downgraded by its owner first (claims of this release
// made writable before the call: the owner may be asking us for one of them meanwhile).
DirWord Space::Impl::lock_entry(Lane& l, RegionState& rs, BlockMeta& m, bool& unchanged, bool may_flush_claims) {
  const size_t b = m.block;
  const int mgr = rs.r->manager(b);
  DirWord guess = m.word0.without_lock();
  wait::Backoff backoff;
  unchanged = true;
  for (;;) {
    DirWord old{l.cas(mgr, rs.dir_addr(mgr, b), rs.rkey(mgr), guess.raw, guess.with_lock().raw)};
    if (old == guess) break;
    unchanged = false;
    if (old.atomic())
      fail("coherence: a plain store to block ", b, " of region ", rs.r->id(), ", which holds atomic words (use Space::atomic_ref)");
    if (old.exclusive() && !old.locked()) {
      if (may_flush_claims) flush_claims(l);
      request_downgrade(l, old, rs, b);
      continue;  // the next CAS returns the entry as the downgrade left it
    }
    if (old.locked()) {
      backoff.pause();
      if (old.exclusive()) continue;  // its owner is downgrading it
    }
    guess = old.without_lock();
  }
  if (!fixed_home && guess.home() >= n) fail("coherence: directory entry of block ", b, " names home ", guess.home(), " (corrupt)");
  return guess;
}

// Whether the entry changed since our copy was taken only because readers extended its lease:
// the version in the home's public copy is still our copy's (a version's wts names it: every
// publication of a block raises it). Then the master is our twin and the release needs no
// merge. Floating home answers without a read when the home is still this process (any other
// release makes its releaser the home, and our own made our copy its version); otherwise one
// READ of the entry, against the block's READ and a merge of it whole. Before this, every
// release of a block others read merged it whole (MCTS's statistics, NAS FT's planes).
bool Space::Impl::only_lease_moved(Lane& l, RegionState& rs, BlockMeta& m, DirWord old) {
  if (old.exclusive()) return false;
  if (!fixed_home && old.home() == rank) return true;
  const int mgr = rs.r->manager(m.block);
  l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory, dir_read_bytes(), rs.dir_addr(mgr, m.block), rs.rkey(mgr));
  l.wait();
  return dir_view(l, rs, m.block).wts == m.data_wts;
}

// Steps 2-3: the new master in `master`, and the entry's sharers in the lane (directory policy).
// Unchanged: the master is our twin, so the new master is our private copy (migratory and
// single-writer blocks: no transfer, no diff). Otherwise one coarse READ of the current master
// (floating home: into our own public copy, which nobody reads while the entry is locked), and
// our diff over it, locally; the private copy takes the others' changes in the same pass.
void Space::Impl::take_master(Lane& l, RegionState& rs, BlockMeta& m, int home, bool unchanged, uint8_t* master) {
  const size_t b = m.block;
  const int mgr = rs.r->manager(b);
  const size_t bs = rs.r->block_size();
  uint8_t* priv = rs.r->runtime_block(b);
  // Overwritten whole (declare_overwrite): our copy is the new master whatever was published
  // meanwhile, so it is not read either.
  if (unchanged || m.whole) {
    std::memcpy(master, priv, bs);
    // The previous blocks' publications stay in flight unless the sharers must be read.
    if (dir_mode) {
      l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory, dir_read_bytes(), rs.dir_addr(mgr, b), rs.rkey(mgr));
      l.wait();
    }
    return;
  }
  if (fixed_home) {
    if (mgr != rank) l.post(mgr, fabric::Opcode::Read, Scratch::kBlock, static_cast<uint32_t>(bs), rs.pub_addr(mgr, b), rs.rkey(mgr));
  } else if (home != rank) {
    l.post_mem(home, fabric::Opcode::Read, rs.mem, rs.pub_offset(b), static_cast<uint32_t>(bs), rs.pub_addr(home, b), rs.rkey(home));
  }
  if (dir_mode) l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory, dir_read_bytes(), rs.dir_addr(mgr, b), rs.rkey(mgr));
  l.wait();
  if (rt.collectives().checking()) report_races(rs, b, master);
  merge_diff(master, priv, rs.twin(b), bs);
  stats.merged_releases.fetch_add(1, std::memory_order_relaxed);
}

// Fault runs' write key: the block is in this release's run unless a run opened it and the
// program did not write it (its private copy is its twin still), so runs shrink with the writes.
void Space::Impl::note_written(RegionState& rs, BlockMeta& m) {
  const size_t b = m.block;
  if (!m.by_run || m.whole || std::memcmp(rs.r->runtime_block(b), rs.twin(b), rs.r->block_size()) != 0)
    m.written_in = interval();
  m.by_run = false;
}

// Checking mode: bytes of block b we wrote that another process wrote too since our twin (the
// master holds theirs) are a data race; the first few are reported, all are counted.
void Space::Impl::report_races(RegionState& rs, size_t b, const uint8_t* master) {
  const Conflict c = conflicting_writes(master, rs.r->runtime_block(b), rs.twin(b), rs.r->block_size());
  if (c.bytes == 0) return;
  constexpr uint64_t kReported = 8;
  const uint64_t k = stats.races.fetch_add(1, std::memory_order_relaxed);
  if (k < kReported) log::warn(race_message(rs.r->app_block(b) + c.first, c.bytes));
  if (k + 1 == kReported) log::warn("coherence: further data races are counted, not reported (Space::stats().races)");
}

// Step 5 (directory policy): a flag and a counter at every other sharer; then only the new
// version's holder remains a sharer.
void Space::Impl::invalidate_sharers(Lane& l, RegionState& rs, size_t b) {
  const int mgr = rs.r->manager(b);
  uint8_t* sh = l.bytes(Scratch::kSharers);
  std::memcpy(sh, l.bytes(Scratch::kDirectory + DirEntry::kSharers), static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == rank || sh[p] == 0) continue;
    l.post(p, fabric::Opcode::Write, Scratch::kOneByte, 1, rs.flag_addr(p, b), rs.rkey(p));
    l.post(p, fabric::Opcode::FetchAdd, Scratch::kCountSink, 8, rs.base(p), rs.rkey(p), 1);
  }
  l.wait();
  std::memset(sh, 0, static_cast<size_t>(n));
  sh[rank] = 1;
  l.post(mgr, fabric::Opcode::Write, Scratch::kSharers, static_cast<uint32_t>(n), rs.dir_addr(mgr, b) + DirEntry::kSharers, rs.rkey(mgr));
}

// Step 6: fixed home takes the merged block back (one coarse WRITE); then the entry's wts and
// the unlocking CAS, on one queue pair, in that order. Nothing after needs their completion, so
// the release goes on to its next block and the fence waits for all of them at its end (the
// entry is ours while W is set: every other CAS on it fails without writing).
void Space::Impl::publish(Lane& l, RegionState& rs, size_t b, DirWord old, uint64_t wts_new, DirWord w0_new) {
  const int mgr = rs.r->manager(b);
  if (fixed_home && mgr != rank) {
    l.post(mgr, fabric::Opcode::Write, Scratch::kBlock, static_cast<uint32_t>(rs.r->block_size()), rs.pub_addr(mgr, b), rs.rkey(mgr));
    l.wait();  // the staging buffer is reused by the next block
  }
  // A ring slot per posted timestamp: post() drains the lane before kWtsSlots are in flight.
  const size_t woff = Scratch::kWtsRing + 8 * (l.posted() % Scratch::kWtsSlots);
  l.set_word(woff, wts_new);
  l.post(mgr, fabric::Opcode::Write, woff, 8, rs.dir_addr(mgr, b) + DirEntry::kWts, rs.rkey(mgr));
  l.post(mgr, fabric::Opcode::CompareSwap, Scratch::kUnlockSink, 8, rs.dir_addr(mgr, b), rs.rkey(mgr), old.with_lock().raw, w0_new.raw);
}

// The copy's version and lease, then its state (peeked at without the block's mutex): Clean,
// whatever it was (a release's Dirty, a downgrade's Exclusive).
void Space::Impl::take_version(BlockMeta& m, uint64_t wts_new, DirWord w0_new) {
  m.whole = false;
  m.data_wts = wts_new;
  m.rts = dir_mode ? UINT64_MAX : w0_new.rts();
  m.state = State::Clean;
}

// Step 7: our private copy is now the new version (merge_diff wrote the others' changes into
// it; writers here wait on the block's mutex); a notice names it.
void Space::Impl::record(RegionState& rs, BlockMeta& m, uint64_t wts_new, DirWord w0_new) {
  take_version(m, wts_new, w0_new);
  m.hint_home = w0_new.home();
  m.hint_wts = wts_new;
  m.word0 = w0_new;
  if (wts_new > m.known_wts.load(std::memory_order_relaxed)) m.known_wts.store(wts_new, std::memory_order_relaxed);
  uint64_t clock = fence.release_clock.load(std::memory_order_relaxed);
  while (clock < wts_new && !fence.release_clock.compare_exchange_weak(clock, wts_new, std::memory_order_relaxed)) {
  }
  if (!dir_mode) {
    std::lock_guard<std::mutex> g(notices.mu);
    notices.buffer.add(Notice{(uint64_t{rs.r->id()} << 32) | m.block, wts_new, static_cast<uint32_t>(rank), w0_new.exclusive()});
  }
  stats.released_blocks.fetch_add(1, std::memory_order_relaxed);
}

// The word a release leaves in the entry: the new home (fixed home: the manager) and lease; a
// claim names this process as exclusive owner; a downgrade marks the block shared for good.
DirWord Space::Impl::next_word0(DirWord old, uint64_t wts_new, Publication how, int mgr) const {
  const uint64_t rts = dir_mode ? wts_new : wts_new + lease;
  // Claims::Always claims shared blocks too (tests: every release through the exclusive paths).
  if (how == Publication::MayClaim && (!old.shared() || cfg.claims == Claims::Always))
    return DirWord::make(rank, rts).with_exclusive();
  DirWord w{DirWord::make(fixed_home ? mgr : rank, rts).raw | old.class_bits().raw};
  return how == Publication::Downgrade ? w.with_shared() : w;
}

// Publishes this process's writes to a dirty block (or an exclusive block's contents, for a
// downgrade). Returns true when the block was claimed exclusively.
bool Space::Impl::release_block(Lane& l, RegionState& rs, BlockMeta& m, bool protected_already, Publication how,
                                const EntryLock* ahead) {
  const size_t b = m.block;
  const int mgr = rs.r->manager(b);
  {
    std::lock_guard<std::mutex> g(dirty.mu);
    if (m.is_linked()) dirty.list.erase(dirty.list.iterator_to(m));
  }
  // Writers of this process fault (and wait for the block's mutex) from here on.
  if (!protected_already) rs.r->protect(b, 1, region::Protection::Read);
  bool unchanged = ahead != nullptr && ahead->unchanged;
  const DirWord old = ahead != nullptr ? ahead->old : lock_entry(l, rs, m, unchanged, how != Publication::Downgrade);
  // An exclusive block's entry is its owner's alone: the downgrade's CAS cannot miss.
  if (how == Publication::Downgrade && !unchanged) fail("coherence: exclusive block ", b, " changed under its owner (corrupt)");
  if (!unchanged && how != Publication::Downgrade && only_lease_moved(l, rs, m, old)) unchanged = true;
  const int home = fixed_home ? mgr : old.home();
  uint8_t* master = fixed_home && mgr != rank ? l.bytes(Scratch::kBlock) : rs.pub_local(b);
  if (how != Publication::Downgrade) note_written(rs, m);
  take_master(l, rs, m, home, unchanged, master);
  // Step 4: the new version is logically after every lease handed out on the old one (rts >=
  // wts always, so rts + 1 is past the old version too).
  const uint64_t wts_new = std::max(old.rts() + 1, lease_floor(rs, b));
  if (wts_new > DirWord::kRtsMask - (uint64_t{1} << 21)) fail("coherence: write timestamps of block ", b, " exhausted");
  const DirWord w0_new = next_word0(old, wts_new, how, mgr);
  // A downgrade adds no sharer to invalidate: the entry's other sharers joined to ask for it.
  if (dir_mode && how != Publication::Downgrade) invalidate_sharers(l, rs, b);
  // A downgrade runs on the service thread, beside this process's acquires, which pass
  // exclusive copies by without their mutex (acquire.cpp): the copy stops being exclusive here
  // before the unlocking CAS lets the asker write and release (its release may reach one of
  // those acquires at once).
  if (how == Publication::Downgrade) take_version(m, wts_new, w0_new);
  publish(l, rs, b, old, wts_new, w0_new);
  if (how == Publication::Downgrade) pause_if_injected();
  record(rs, m, wts_new, w0_new);
  if (!w0_new.exclusive()) return false;
  stats.exclusive_claims.fetch_add(1, std::memory_order_relaxed);
  rs.win_claims.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Space::Impl::invalidate(RegionState& rs, BlockMeta& m) {
  m.state = State::Invalid;
  rs.r->protect(m.block, 1, region::Protection::None);
  stats.invalidations.fetch_add(1, std::memory_order_relaxed);
}

// A copy that may be stale after an acquire: a dirty one is published first (which makes it
// current), a clean one is invalidated.
// An exclusive copy is current by definition and stays.
void Space::Impl::drop(std::optional<LaneGuard>& lane, RegionState& rs, BlockMeta& m) {
  if (m.state == State::Dirty) {
    if (!lane) lane.emplace(lanes);
    release_block(**lane, rs, m);
  } else if (m.state == State::Clean) {
    invalidate(rs, m);
  }
}

// Stops this process's writers on every dirty block with one mprotect per run of adjacent
// blocks: each call costs a TLB shootdown across the process's threads. A writer that faults on
// a block before its turn finds it still dirty and retries until it is released.
void Space::Impl::stop_writers(const std::vector<BlockMeta*>& v) {
  for (size_t i = 0; i < v.size();) {
    size_t j = i + 1;
    while (j < v.size() && v[j]->region_slot == v[i]->region_slot && v[j]->block == v[j - 1]->block + 1) ++j;
    regions[v[i]->region_slot].load(std::memory_order_acquire)->r->protect(v[i]->block, j - i, region::Protection::Read);
    i = j;
  }
}

// Each region's share of the release ages its claim window, which then decides whether this
// release may claim the region's blocks (v sorted by region; fence.mu held).
void Space::Impl::judge_claims(const std::vector<BlockMeta*>& v) {
  for (size_t i = 0; i < v.size();) {
    size_t j = i + 1;
    while (j < v.size() && v[j]->region_slot == v[i]->region_slot) ++j;
    RegionState* rs = regions[v[i]->region_slot].load(std::memory_order_acquire);
    age_claim_window(*rs, j - i);
    rs->claims_now = claims_pay(*rs);
    i = j;
  }
}

// A release fence; fence.mu held.
void Space::Impl::release_locked() {
  stats.intervals.fetch_add(1, std::memory_order_relaxed);  // a new interval: fault runs' keys (interval())
  DirtyList taken;
  {
    std::lock_guard<std::mutex> g(dirty.mu);
    taken.swap(dirty.list);
  }
  if (taken.empty()) return;
  std::vector<BlockMeta*> v;
  while (!taken.empty()) {
    v.push_back(&taken.front());
    taken.pop_front();
  }
  std::sort(v.begin(), v.end(), [](const BlockMeta* a, const BlockMeta* b) {
    return a->region_slot != b->region_slot ? a->region_slot < b->region_slot : a->block < b->block;
  });
  stop_writers(v);
  LaneGuard lane(lanes);
  judge_claims(v);
  for (size_t w = 0; w < v.size(); w += kMaxPrefetch)
    release_window(*lane, std::span<BlockMeta* const>(v).subspan(w, std::min(kMaxPrefetch, v.size() - w)));
  flush_claims(*lane);
  lane->wait();  // every entry unlocked: the release is complete
}

// A window of the release's blocks: the entries locked ahead are released first, then the
// others, each locked on its own (lock_ahead.cpp says why in that order).
void Space::Impl::release_window(Lane& l, std::span<BlockMeta* const> win) {
  const std::vector<EntryLock> ahead = lock_ahead(l, win);
  for (size_t i = 0; i < win.size(); ++i)
    if (ahead[i].held) release_one(l, win[i], &ahead[i]);
  for (size_t i = 0; i < win.size(); ++i)
    if (!ahead[i].held) release_one(l, win[i], nullptr);
}

void Space::Impl::release_one(Lane& l, BlockMeta* m, const EntryLock* ahead) {
  // A run of claims holds its blocks' mutexes until it is flushed: at most kMaxClaimRun of them
  // (ThreadSanitizer tracks 64 held locks per thread; a run this long already saves most of the
  // page-table changes).
  if (!exclusive.claims.empty() && (exclusive.claims.back().m->region_slot != m->region_slot || exclusive.claims.back().m->block + 1 != m->block ||
                          exclusive.claims.size() >= kMaxClaimRun))
    flush_claims(l);
  RegionState* rs = regions[m->region_slot].load(std::memory_order_acquire);
  const Publication how = rs->claims_now ? Publication::MayClaim : Publication::Release;
  std::unique_lock<std::mutex> g(m->mu);
  if (m->state != State::Dirty) {
    if (ahead != nullptr) unlock_ahead(l, *rs, m->block, ahead->old);
    return;
  }
  if (release_block(l, *rs, *m, true, how, ahead)) exclusive.claims.push_back(Claim{m, std::move(g)});
}

void Space::Impl::release() {
  region::InRuntime ir;
  std::lock_guard<std::mutex> g(fence.mu);
  release_locked();
}

void Space::release() { impl_->release(); }

}  // namespace loom::coherence
