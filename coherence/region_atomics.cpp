// Atomic words in regions (docs/coherence.md, "Atomic words in regions"): 8-byte words in
// blocks marked atomic, whose values live in the block manager's public copy and are touched
// only by fabric atomics there. The page protocol never caches such a block: its directory
// entry carries A, which every fault, declaration and release refuses. A release through one
// of them leaves this process's release clock in the entry's wts field; an acquire through it
// takes that clock as its lease bound (timestamp policies) or applies the invalidation flags
// the releases before it set here (directory policies).
#include <cstring>

#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::coherence {

// One block: the entry becomes A if no plain store was ever published to it (wts 0, no E of
// another process, not shared); an entry already A is left alone (another process marked it).
void Space::Impl::mark_block_atomic(Lane& l, RegionState& rs, BlockMeta& m) {
  const size_t b = m.block;
  const int mgr = rs.r->manager(b);
  if (m.state == State::Dirty)
    fail("coherence: block ", b, " of region ", rs.r->id(), " holds plain stores not yet released; it cannot hold atomic words");
  wait::Backoff backoff;
  for (;;) {
    l.post(mgr, fabric::Opcode::Read, Scratch::kDirectory, 16, rs.dir_addr(mgr, b), rs.rkey(mgr));
    l.wait();
    const DirWord w{l.word(Scratch::kDirectory)};
    uint64_t wts;
    std::memcpy(&wts, l.bytes(Scratch::kDirectory + 8), 8);
    if (w.atomic()) break;
    if (w.locked()) {
      backoff.pause();
      continue;
    }
    if (wts != 0 || w.shared() || (w.exclusive() && w.home() != rank))
      fail("coherence: block ", b, " of region ", rs.r->id(), " already holds data published by plain stores; it cannot hold atomic words");
    if (l.cas(mgr, rs.dir_addr(mgr, b), rs.rkey(mgr), w.raw, w.with_atomic().raw) == w.raw) break;
  }
  m.state = State::Atomic;
  rs.r->protect(b, 1, region::Protection::None);
}

void Space::Impl::mark_atomic(RegionState& rs, size_t first, size_t count) {
  region::InRuntime ir;
  LaneGuard lane(lanes);
  for (size_t b = first; b < first + count; ++b) {
    BlockMeta& m = rs.meta[b];
    std::lock_guard<std::mutex> g(m.mu);
    if (m.state != State::Atomic) mark_block_atomic(*lane, rs, m);
  }
}

// A block another process made atomic: learned from its entry on first use.
void Space::Impl::adopt_atomic(RegionState& rs, size_t b) {
  BlockMeta& m = rs.meta[b];
  if (m.state == State::Atomic) return;
  region::InRuntime ir;
  LaneGuard lane(lanes);
  std::lock_guard<std::mutex> g(m.mu);
  if (m.state == State::Atomic) return;
  const int mgr = rs.r->manager(b);
  lane->post(mgr, fabric::Opcode::Read, Scratch::kResult, 8, rs.dir_addr(mgr, b), rs.rkey(mgr));
  lane->wait();
  if (!DirWord{lane->word(Scratch::kResult)}.atomic())
    fail("coherence: block ", b, " of region ", rs.r->id(), " does not hold atomic words (Space::new_atomic_words makes them)");
  if (m.state == State::Dirty) fail("coherence: block ", b, " of region ", rs.r->id(), " holds atomic words and plain stores of this process");
  m.state = State::Atomic;
  rs.r->protect(b, 1, region::Protection::None);
}

// Raises the entry's clock (its wts field) to ours; the acquirer reads it after its own
// operation on the word, which follows ours: this completes before our operation is posted.
// The entry only ever rises (every writer CASes it upward from a value it held), so a value this
// process saw there — by an acquire's READ or a CAS's result — is a floor: at or above our clock,
// nothing is sent; below it, the CAS expects it (usually the entry's value: one CAS) and on a
// miss retries from what it found. A CAS never expects a value at or above our clock, so it
// never lowers the entry (a guess that succeeded there would). fence.mu held.
void Space::Impl::publish_release_clock(Lane& l, RegionState& rs, size_t b) {
  const int mgr = rs.r->manager(b);
  const uint64_t clock = std::max(fence.release_clock.load(std::memory_order_relaxed), acq_ts_relaxed());
  const uint64_t addr = rs.dir_addr(mgr, b) + DirEntry::kWts;
  uint64_t& seen = rs.meta[b].atomic_clock;
  while (seen < clock) {
    const uint64_t old = l.cas(mgr, addr, rs.rkey(mgr), seen, clock);
    seen = old == seen ? clock : std::max(seen, old);
  }
}

// op is FetchAdd or CompareSwap, or Read for a load (a FETCH_ADD of 0).
uint64_t Space::Impl::region_atomic_op(RegionState& rs, size_t b, size_t off, fabric::Opcode op, uint64_t a, uint64_t c,
                                       Order o) {
  const bool rel = o == Order::Release || o == Order::AcqRel;
  const bool acq = o == Order::Acquire || o == Order::AcqRel;
  const int mgr = rs.r->manager(b);
  const uint64_t addr = rs.pub_addr(mgr, b) + off;
  region::InRuntime ir;
  // Relaxed operations take no fence: threads of a process run them side by side.
  std::unique_lock<std::mutex> fenced(fence.mu, std::defer_lock);
  if (rel || acq) fenced.lock();
  if (rel) release_locked();
  uint64_t old = 0, clock = 0;
  {
    LaneGuard lane(lanes);
    if (rel && !dir_mode) publish_release_clock(*lane, rs, b);
    if (op == fabric::Opcode::Read) lane->post(mgr, fabric::Opcode::FetchAdd, Scratch::kResult, 8, addr, rs.rkey(mgr), 0);
    else lane->post(mgr, op, Scratch::kResult, 8, addr, rs.rkey(mgr), a, c);
    // An acquire reads the entry's clock behind its operation, in the same round trip: requests on
    // one queue pair execute in order at the manager (docs/provider-contract.md, "Ordering"), so
    // the READ follows our operation there, and with it any operation ours saw and the clock CAS
    // its releaser completed before posting it (publish_release_clock).
    if (acq && !dir_mode) lane->post(mgr, fabric::Opcode::Read, Scratch::kClock, 8, rs.dir_addr(mgr, b) + DirEntry::kWts, rs.rkey(mgr));
    lane->wait();
    old = lane->word(Scratch::kResult);
    if (acq && !dir_mode) {
      clock = lane->word(Scratch::kClock);
      rs.meta[b].atomic_clock = std::max(rs.meta[b].atomic_clock, clock);
    }
  }
  if (acq) acquire_locked(clock);
  return old;
}

uint64_t* Space::new_atomic_words(region::Region& r, size_t count, bool local, const std::source_location& where) {
  if (!local) rt_.collectives().enter("Space::new_atomic_words", where);
  Impl& I = *impl_;
  RegionState* rs = I.state_of(r);
  if (rs == nullptr) fail("coherence: new_atomic_words in a region this Space does not hold");
  if (count == 0) fail("coherence: new_atomic_words of 0 words");
  const size_t bs = r.block_size();
  if (count > (SIZE_MAX - bs) / 8) fail("coherence: new_atomic_words of ", count, " words overflows");
  const size_t bytes = (count * 8 + bs - 1) / bs * bs;
  uint8_t* p;
  if (local) {
    // The local arena aligns to 64 bytes at most: one block more, and the first whole block.
    auto* raw = static_cast<uint8_t*>(r.allocate_local(bytes + bs, 64));
    p = r.app_block(r.block_of(raw + bs - 1));
  } else {
    p = static_cast<uint8_t*>(r.allocate(bytes, bs));
  }
  I.mark_atomic(*rs, r.block_of(p), bytes / bs);
  return reinterpret_cast<uint64_t*>(p);
}

AtomicRef Space::atomic_ref(uint64_t* word) {
  Impl& I = *impl_;
  region::Region* r = I.as->find(word);
  if (r == nullptr || !r->contains(word, 8)) fail("coherence: atomic_ref of ", static_cast<void*>(word), ": not inside a shared region");
  if (reinterpret_cast<uintptr_t>(word) % 8 != 0) fail("coherence: atomic_ref of ", static_cast<void*>(word), ": not 8-byte aligned");
  RegionState* rs = I.state_of(*r);
  const size_t b = r->block_of(word);
  I.adopt_atomic(*rs, b);
  AtomicRef a;
  a.space_ = this;
  a.region_ = r->id();
  a.block_ = b;
  a.offset_ = static_cast<size_t>(static_cast<uint8_t*>(static_cast<void*>(word)) - r->app_block(b));
  return a;
}

RegionState& AtomicRef::state() const {
  if (space_ == nullptr) fail("coherence: use of an AtomicRef not made by Space::atomic_ref");
  RegionState* rs = space_->impl_->state_by_id(region_);
  if (rs == nullptr) fail("coherence: use of an AtomicRef whose region was destroyed");
  return *rs;
}

uint64_t AtomicRef::fetch_add(uint64_t v, Order o) {
  RegionState& rs = state();
  return space_->impl_->region_atomic_op(rs, block_, offset_, fabric::Opcode::FetchAdd, v, 0, o);
}

uint64_t AtomicRef::compare_swap(uint64_t expected, uint64_t desired, Order o) {
  RegionState& rs = state();
  return space_->impl_->region_atomic_op(rs, block_, offset_, fabric::Opcode::CompareSwap, expected, desired, o);
}

uint64_t AtomicRef::load(Order o) {
  if (o == Order::Release || o == Order::AcqRel) fail("coherence: a load cannot be a release");
  RegionState& rs = state();
  return space_->impl_->region_atomic_op(rs, block_, offset_, fabric::Opcode::Read, 0, 0, o);
}

// A CAS loop: the word is touched only by fabric atomics. The first attempt releases.
void AtomicRef::store(uint64_t v, Order o) {
  if (o == Order::Acquire || o == Order::AcqRel) fail("coherence: a store cannot be an acquire");
  RegionState& rs = state();
  Space::Impl& I = *space_->impl_;
  uint64_t cur = I.region_atomic_op(rs, block_, offset_, fabric::Opcode::Read, 0, 0, o);
  for (;;) {
    const uint64_t old = I.region_atomic_op(rs, block_, offset_, fabric::Opcode::CompareSwap, cur, v, Order::Relaxed);
    if (old == cur) return;
    cur = old;
  }
}

}  // namespace loom::coherence
