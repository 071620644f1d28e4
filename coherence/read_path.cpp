// The read path (docs/coherence.md, "Read miss"): fetch a block as a read copy from the home
// (or straight from the last releaser a notice named), validate it against the directory
// entry, extend the lease, join the sharers; and the first write of a clean block (its twin).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/stall.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/runtime/output.hpp"

namespace loom::coherence {

DirView Space::Impl::dir_view(Lane& l, const RegionState& rs, size_t b, size_t off) {
  const uint8_t* p = l.bytes(off);
  DirView d;
  d.word0 = DirWord{l.word(off + DirEntry::kWord0)};
  std::memcpy(&d.wts, p + DirEntry::kWts, 8);
  d.sharers = p + DirEntry::kSharers;
  if (d.word0.home() >= n)
    fail("coherence: directory entry of block ", b, " of region ", rs.r->id(), " names home ", d.word0.home(), " of ", n, " ranks (corrupt)");
  return d;
}

// One attempt's reads: join the sharers (directory policy), the block's data unless the private
// copy already holds the version aimed at, then the directory entry, which executes after the
// data read (the same queue pair, or a wait between them).
void Space::Impl::post_fetch_reads(Lane& l, RegionState& rs, size_t b, int home, bool have_data) {
  const int mgr = rs.r->manager(b);
  // Before validating: a releaser that locks the entry after our validation read sees us and
  // invalidates our copy.
  if (dir_mode) post_join_sharers(l, rs, b);
  if (!have_data) {
    l.post(home, fabric::Opcode::Read, Scratch::kBlock, static_cast<uint32_t>(rs.r->block_size()), rs.pub_addr(home, b), rs.rkey(home));
    if (home != mgr) l.wait();
  }
  l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory, dir_read_bytes(), rs.dir_addr(mgr, b), rs.rkey(mgr));
  l.wait();
}

void Space::Impl::post_join_sharers(Lane& l, RegionState& rs, size_t b) {
  const int mgr = rs.r->manager(b);
  l.post(mgr, fabric::Opcode::Write, Scratch::kOneByte, 1, rs.dir_addr(mgr, b) + DirEntry::kSharers + static_cast<size_t>(rank), rs.rkey(mgr));
}

// Logical lease: the copy must stay valid at least until our acquire time plus a lease. Returns
// false when the entry changed under us (validate again; the data may still be good).
bool Space::Impl::extend_lease(Lane& l, RegionState& rs, size_t b, DirView& d, uint64_t wts) {
  const std::optional<DirWord> nw = longer_lease(rs, b, d, wts);
  if (!nw) return true;
  const int mgr = rs.r->manager(b);
  uint64_t old = l.cas(mgr, rs.dir_addr(mgr, b), rs.rkey(mgr), d.word0.raw, nw->raw);
  if (old != d.word0.raw) return false;
  d.word0 = *nw;
  return true;
}

// The entry word with the lease a copy of version wts needs, or nothing when the entry's lease
// is long enough already (at least half a lease past what we want).
std::optional<DirWord> Space::Impl::longer_lease(const RegionState& rs, size_t b, const DirView& d, uint64_t wts) {
  const uint64_t want = std::max(wts, lease_floor(rs, b)) + lease;
  if (d.word0.rts() >= want - lease / 2) return std::nullopt;
  return d.word0.with_rts(want);
}

// The directory entry alone (no data): what to aim at when the version is unknown. False while
// a releaser holds the entry.
bool Space::Impl::read_entry(Lane& l, RegionState& rs, size_t b, DirView& d) {
  const int mgr = rs.r->manager(b);
  l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory, dir_read_bytes(), rs.dir_addr(mgr, b), rs.rkey(mgr));
  l.wait();
  d = dir_view(l, rs, b);
  return !d.word0.locked();
}

// Makes an invalid block's private copy current (Clean), or confirms the data it holds. One
// data read per miss: the version aimed at is known before the data is read (a notice, the last
// version seen, or the directory entry read alone when an invalidation flag left it unknown),
// and data read once stays in the lane's staging buffer while a lease or a downgrade is sorted.
void Space::Impl::fetch(Lane& l, RegionState& rs, BlockMeta& m, DowngradeRun* run) {
  const size_t b = m.block;
  const int mgr = rs.r->manager(b);
  int home = fixed_home ? mgr : m.hint_home;
  uint64_t wts = m.hint_wts;
  const bool fast = m.hint_home != m.word0.home();
  uint64_t staged = kUnknownWts;  // a version the lane's staging buffer holds, validated
  uint64_t data_reads = 0;
  wait::Backoff backoff;
  wait::StallWatch stall;
  for (;;) {
    stall.check([&] {
      return "coherence: fetching block " + std::to_string(b) + " of region " + std::to_string(rs.r->id()) +
             " waits for its directory entry (manager rank " + std::to_string(mgr) + ") to be unlocked and current";
    });
    DirView d;
    if (wts == kUnknownWts) {
      if (!read_entry(l, rs, b, d)) {
        backoff.pause();
        continue;
      }
    } else {
      // The private copy may still hold the version aimed at: then one directory read confirms
      // it (an expired lease, or an invalidation that changed nothing).
      const bool have = m.data_wts == wts || staged == wts;
      post_fetch_reads(l, rs, b, home, have);
      if (!have) ++data_reads;
      d = dir_view(l, rs, b);
    }
    if (d.word0.atomic())
      fail("coherence: a plain access to block ", b, " of region ", rs.r->id(), ", which holds atomic words (use Space::atomic_ref)");
    if (d.word0.exclusive() && !d.word0.locked()) {
      // Its owner alone holds it: ask for a downgrade, then read the version it published.
      request_downgrade(l, d.word0, rs, b, run);
      wts = kUnknownWts;
      continue;
    }
    if (wts == kUnknownWts || d.word0.locked() || d.word0.home() != home || d.wts != wts) {
      // Moved on since the version we aimed at, or being published now: aim at what the entry
      // says (a state it really had) and read again.
      home = fixed_home ? mgr : d.word0.home();
      wts = d.word0.exclusive() ? kUnknownWts : d.wts;
      if (d.word0.locked()) backoff.pause();
      continue;
    }
    // Validated: the data read (if any) is version wts whole. A failed lease extension only
    // means the entry moved since; the staged data is kept for the next validation.
    if (!dir_mode && !extend_lease(l, rs, b, d, wts)) {
      if (m.data_wts != wts) staged = wts;
      continue;
    }
    if (m.data_wts == wts) {
      stats.revalidations.fetch_add(1, std::memory_order_relaxed);
    } else {
      fill_runtime_block(rs, b, l.bytes(Scratch::kBlock));
      stats.read_misses.fetch_add(1, std::memory_order_relaxed);
      if (fast && data_reads == 1) stats.fast_reads.fetch_add(1, std::memory_order_relaxed);
    }
    if (data_reads > 1) stats.fetch_retries.fetch_add(data_reads - 1, std::memory_order_relaxed);
    stats.bytes_fetched.fetch_add(data_reads * rs.r->block_size(), std::memory_order_relaxed);
    if (take_copy(rs, m, d, wts)) return;
    wts = m.data_wts;
  }
}

// The validated version wts (its bytes in the runtime view already) becomes the copy: Clean,
// with the entry's lease. False when it went back to Invalid (the data kept): another thread's
// acquire may have raised the lease floor while the fetch ran, and passed this block by while it
// was still invalid; a copy whose lease ends below the floor now would outlive that acquire, so
// it is revalidated with a lease past the floor.
bool Space::Impl::take_copy(RegionState& rs, BlockMeta& m, const DirView& d, uint64_t wts) {
  m.data_wts = wts;
  m.hint_home = d.word0.home();
  m.hint_wts = wts;
  m.rts = dir_mode ? UINT64_MAX : d.word0.rts();
  m.word0 = d.word0;
  m.state = State::Clean;  // the caller opens the application view if it needs to
  if (dir_mode || m.rts >= floor_after_install(rs, m.block)) return true;
  m.state = State::Invalid;
  return false;
}

// A fetched version into the runtime view, word by word (relaxed atomics, plain moves on x86):
// another thread of this process may be reading words of the block through a pointer from
// declare_read_view (a reader that validates what it read, as a seqlock does), and a copy of
// the same bytes is then no data race.
void Space::Impl::fill_runtime_block(RegionState& rs, size_t b, const uint8_t* src) {
  auto* dst = reinterpret_cast<uint64_t*>(rs.r->runtime_block(b));
  const size_t words = rs.r->block_size() / 8;
  for (size_t k = 0; k < words; ++k) {
    uint64_t w;
    std::memcpy(&w, src + k * 8, 8);
    std::atomic_ref<uint64_t>(dst[k]).store(w, std::memory_order_relaxed);
  }
}

// The lease floor as an acquire that raised it sees it. Sequentially consistent: the state was
// just stored (seq_cst), and an acquirer stores the floor (seq_cst) before it looks at the
// states, so one of the two sees the other's store.
uint64_t Space::Impl::floor_after_install(RegionState& rs, size_t b) {
  const uint64_t a = std::atomic_ref<uint64_t>(fence.acq_ts).load(std::memory_order_seq_cst);
  return std::max(a, rs.chunk_known[b / kChunkBlocks].load(std::memory_order_seq_cst));
}

void Space::Impl::make_dirty(RegionState& rs, BlockMeta& m) {
  twin_block(rs, m);
  // Listed and made writable as one step under dirty.mu, which a release holds to take the
  // list. Listed first and opened after, a release could take the block in between and stop
  // its writers (stop_writers) before this ReadWrite: once released it stayed writable yet
  // clean, and stores after were never published. Opened first, a store of another thread
  // could precede the listing and miss that thread's next release.
  {
    std::lock_guard<std::mutex> g(dirty.mu);
    dirty.list.push_back(m);
    rs.r->protect(m.block, 1, region::Protection::ReadWrite);
  }
}

void Space::Impl::twin_block(RegionState& rs, BlockMeta& m) {
  std::memcpy(rs.twin(m.block), rs.r->runtime_block(m.block), rs.r->block_size());
  m.state = State::Dirty;
  stats.twins.fetch_add(1, std::memory_order_relaxed);
}

// Lists a run of adjacent twinned blocks and opens them with one mprotect, as make_dirty does
// for one (the same step under dirty.mu), then lets go of their mutexes.
void Space::Impl::open_run(RegionState& rs, std::vector<std::unique_lock<std::mutex>>& held, size_t first) {
  if (held.empty()) return;
  {
    std::lock_guard<std::mutex> g(dirty.mu);
    for (size_t i = 0; i < held.size(); ++i) dirty.list.push_back(rs.meta[first + i]);
    rs.r->protect(first, held.size(), region::Protection::ReadWrite);
  }
  held.clear();  // unlocks
}

// Makes every block of [p, p+len) current (and, for a write, dirty and writable) without a
// fault. A read leaves the application view as it was (no mprotect on this path); the bytes
// are read through the runtime's view, whose address this returns. The blocks a write makes
// dirty are opened in runs of adjacent blocks, one mprotect per run of up to kMaxClaimRun
// (their mutexes held until then, as a release holds its claims).
const void* Space::Impl::declare(const void* p, size_t len, Access how) {
  const bool write = how != Access::Read;
  region::Region* r = as->find(p);
  if (r == nullptr || !r->contains(p, len))
    fail("coherence: ", write ? "write" : "read", " of ", len, " bytes at ", p, ": not inside one shared region");
  RegionState* rs = state_of(*r);
  if (len == 0) return r->runtime_view(p);
  region::InRuntime ir;
  size_t first = r->block_of(p), last = r->block_of(static_cast<const uint8_t*>(p) + len - 1);
  std::optional<LaneGuard> lane;
  if (last > first) {
    lane.emplace(lanes);
    prefetch(**lane, *rs, first, last + 1);
  }
  std::vector<std::unique_lock<std::mutex>> run;  // twinned blocks [run_first, run_first + size)
  size_t run_first = 0;
  DowngradeRun asked;  // one downgrade request for the owner's blocks of the access
  asked.end = last + 1;
  for (size_t b = first; b <= last; ++b) {
    BlockMeta& m = rs->meta[b];
    // A racy peek, confirmed under the mutex.
    const State st = m.state;
    if (st == State::Atomic)
      fail("coherence: declared ", write ? "write" : "read", " of block ", b, " of region ", r->id(), ", which holds atomic words (use Space::atomic_ref)");
    if (st == State::Dirty || st == State::Exclusive || (!write && st == State::Clean)) continue;
    if (!lane) lane.emplace(lanes);
    std::unique_lock<std::mutex> g(m.mu);
    if (m.state == State::Invalid) fetch(**lane, *rs, m, &asked);
    if (!write || m.state != State::Clean) continue;
    if (!run.empty() && (run_first + run.size() != b || run.size() >= kMaxClaimRun)) open_run(*rs, run, run_first);
    if (run.empty()) run_first = b;
    // Overwritten whole: the blocks the range covers entirely need no twin.
    const uint8_t* start = r->app_block(b);
    const bool whole = how == Access::Overwrite && start >= p && start + r->block_size() <= static_cast<const uint8_t*>(p) + len;
    if (whole) m.state = State::Dirty, m.whole = true;
    else twin_block(*rs, m);
    run.push_back(std::move(g));
  }
  open_run(*rs, run, run_first);
  return r->runtime_view(p);
}

void Space::declare_read(const void* p, size_t n) { impl_->declare(p, n, Impl::Access::Read); }
void Space::declare_write(void* p, size_t n) { impl_->declare(p, n, Impl::Access::Write); }
void Space::declare_overwrite(void* p, size_t n) { impl_->declare(p, n, Impl::Access::Overwrite); }
const void* Space::declare_read_view(const void* p, size_t n) { return impl_->declare(p, n, Impl::Access::Read); }

void Space::on_fault(region::Region& r, size_t block, region::Access access) {
  Impl& I = *impl_;
  RegionState* rs = I.state_of(r);
  if (rs == nullptr) {
    static const char msg[] = "loom: fault in a region without protocol state\n";
    ssize_t k = ::write(2, msg, sizeof msg - 1);
    (void)k;
    abort();
  }
  region::InRuntime ir;
  I.stats.faults.fetch_add(1, std::memory_order_relaxed);
  bool busy = false;
  try {
    LaneGuard lane(I.lanes);
    BlockMeta& m = rs->meta[block];
    std::lock_guard<std::mutex> g(m.mu);
    // Without the hardware's word (Access::Unknown), a fault on a readable block can only be a write.
    const bool write = access == region::Access::Write || (access == region::Access::Unknown && m.state == State::Clean);
    if (m.state == State::Atomic)
      fail("a plain ", write ? "store to" : "load from", " a block of atomic words (use Space::atomic_ref)");
    if (m.state == State::Exclusive) rs->r->protect(block, 1, region::Protection::ReadWrite);  // a claim made writable since
    const uint32_t key = write ? m.written_in : m.read_in;  // the run this fault may open (fault_run.cpp)
    if (m.state == State::Invalid) I.fetch(*lane, *rs, m);
    if (write && m.state == State::Clean) {
      if (!I.fault_run(*lane, *rs, m, true, key)) I.make_dirty(*rs, m);
    } else if (!write && m.state == State::Clean) {
      // A clean block's application view opens at its first plain read: fetches (and the
      // explicit path) leave it closed, which spares an mprotect wherever nobody reads through it.
      if (!I.fault_run(*lane, *rs, m, false, key)) {
        rs->r->protect(block, 1, region::Protection::Read);
        I.opened_for_read(m);
      }
    } else if (write && m.state == State::Dirty) {
      // Still dirty yet not writable: a release has stopped writers on it and will reach it
      // soon. Give it the processor; the store faults again until then.
      busy = true;
    }
  } catch (const std::exception& e) {
    // No exception leaves a signal handler: the process ends with the reason, as an uncaught
    // loom::Error does (status 1), not with an abort and a core dump.
    log::error("coherence: fault on block ", block, " of region ", r.id(), ": ", e.what());
    runtime::flush_output_if_free();
    std::_Exit(1);
  }
  if (busy) sched_yield();
}

}  // namespace loom::coherence
