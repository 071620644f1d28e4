// Atomic words: an 8-byte value in a sync-object slot at the word's home, operated on with
// fabric atomics. Slot layout: [0] notice lock, [8] value, [64..] the notices of every release
// made through this word (merged, since several releasers may precede one acquirer).
#include <cstring>

#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::coherence {

namespace {
constexpr uint64_t kNoticeLock = 0, kValue = 8, kNotices = 64;

// The word's notice lock: a CAS from 0 to rank + 1 at the slot's first word; released by a CAS
// back, posted on the same queue pair after the notices' READ or WRITE.
uint64_t lock_word_notices(Lane& l, int rank, int home, uint64_t base, uint32_t rkey) {
  const uint64_t me = static_cast<uint64_t>(rank) + 1;
  wait::Backoff bo;
  while (l.cas(home, base + kNoticeLock, rkey, 0, me) != 0) bo.pause();
  return me;
}
}

AtomicWord Space::make_atomic(uint64_t initial, const std::source_location& where) {
  rt_.collectives().enter("Space::make_atomic", where);
  Impl& I = *impl_;
  if (I.sync.next_slot >= cfg_.sync_objects) fail("coherence: more than ", cfg_.sync_objects, " locks and atomic words (LOOM_COHERENCE_SYNC_OBJECTS)");
  AtomicWord a;
  a.bind(this, I.sync.next_slot++, I.n);
  if (a.home_ == I.rank) std::memcpy(I.sync.slot_local(a.slot_) + kValue, &initial, 8);
  rt_.bootstrap().barrier();
  return a;
}

// Merges our notices into the word's under its notice lock, so an acquirer sees every release
// before its read. Corrupt notices at the word are replaced by ours, which is what this
// release must carry.
void Space::Impl::merge_notices_into_word(Lane& l, int home, uint64_t base, uint32_t rkey) {
  const size_t cap = notice_cap_bytes();
  const uint64_t me = lock_word_notices(l, rank, home, base, rkey);
  l.post(home, fabric::Opcode::Read, Scratch::kNoticesIn, static_cast<uint32_t>(cap), base + kNotices, rkey);
  l.wait();
  NoticeBuffer merged(cfg.notices);
  if (!merged.merge_wire(std::span<const uint8_t>(l.bytes(Scratch::kNoticesIn), cap), static_cast<uint32_t>(n))) merged.clear();
  {
    std::lock_guard<std::mutex> ng(notices.mu);
    merged.merge(notices.buffer);
  }
  size_t len = merged.serialize(l.bytes(Scratch::kNoticesOut));
  l.post(home, fabric::Opcode::Write, Scratch::kNoticesOut, static_cast<uint32_t>(len), base + kNotices, rkey);
  l.post(home, fabric::Opcode::CompareSwap, Scratch::kUnlockSink, 8, base + kNoticeLock, rkey, me, 0);
  l.wait();
}

// op is FetchAdd or CompareSwap, or Read for a load (a FETCH_ADD of 0).
uint64_t Space::Impl::atomic_op(int home, uint32_t slot, fabric::Opcode op, uint64_t a, uint64_t b, Order o) {
  const uint64_t base = sync.slot_addr(home, slot);
  const uint32_t rkey = sync.rkey(home);
  const bool rel = o == Order::Release || o == Order::AcqRel;
  const bool acq = o == Order::Acquire || o == Order::AcqRel;
  region::InRuntime ir;
  std::lock_guard<std::mutex> g(fence.mu);
  if (rel) release_locked();
  LaneGuard lane(lanes);
  if (rel) merge_notices_into_word(*lane, home, base, rkey);
  if (op == fabric::Opcode::Read) lane->post(home, fabric::Opcode::FetchAdd, Scratch::kResult, 8, base + kValue, rkey, 0);
  else lane->post(home, op, Scratch::kResult, 8, base + kValue, rkey, a, b);
  lane->wait();
  const uint64_t old = lane->word(Scratch::kResult);
  if (acq) {
    const size_t cap = notice_cap_bytes();
    const uint64_t me = lock_word_notices(*lane, rank, home, base, rkey);
    lane->post(home, fabric::Opcode::Read, Scratch::kNoticesIn, static_cast<uint32_t>(cap), base + kNotices, rkey);
    lane->post(home, fabric::Opcode::CompareSwap, Scratch::kUnlockSink, 8, base + kNoticeLock, rkey, me, 0);
    lane->wait();
    acquire_wire(std::span<const uint8_t>(lane->bytes(Scratch::kNoticesIn), cap), "atomic word ", slot);
  }
  return old;
}

void Space::fence(AtomicWord& word) {
  if (word.space_ != this) fail("coherence: Space::fence through an AtomicWord this Space did not make");
  Impl& I = *impl_;
  I.atomic_op(word.home_, word.slot_, fabric::Opcode::Read, 0, 0, Order::AcqRel);
  if (I.dir_mode) return;  // the directory's invalidation flags reached the acquire above
  region::InRuntime ir;
  std::lock_guard<std::mutex> g(I.fence.mu);
  std::optional<LaneGuard> lane;
  I.apply_lease_bound(lane, I.fence.acq_ts + 1);
}

uint64_t AtomicWord::fetch_add(uint64_t v, Order o) {
  if (space_ == nullptr) fail("coherence: use of an AtomicWord not made by Space::make_atomic");
  return space_->impl_->atomic_op(home_, slot_, fabric::Opcode::FetchAdd, v, 0, o);
}

uint64_t AtomicWord::compare_swap(uint64_t expected, uint64_t desired, Order o) {
  if (space_ == nullptr) fail("coherence: use of an AtomicWord not made by Space::make_atomic");
  return space_->impl_->atomic_op(home_, slot_, fabric::Opcode::CompareSwap, expected, desired, o);
}

uint64_t AtomicWord::load(Order o) {
  if (space_ == nullptr) fail("coherence: use of an AtomicWord not made by Space::make_atomic");
  if (o == Order::Release || o == Order::AcqRel) fail("coherence: a load cannot be a release");
  return space_->impl_->atomic_op(home_, slot_, fabric::Opcode::Read, 0, 0, o);
}

void AtomicWord::store(uint64_t v, Order o) {
  if (space_ == nullptr) fail("coherence: use of an AtomicWord not made by Space::make_atomic");
  if (o == Order::Acquire || o == Order::AcqRel) fail("coherence: a store cannot be an acquire");
  Space::Impl& I = *space_->impl_;
  // A CAS loop: the word is touched only by fabric atomics. The first attempt releases.
  uint64_t cur = I.atomic_op(home_, slot_, fabric::Opcode::Read, 0, 0, o);
  for (;;) {
    uint64_t old = I.atomic_op(home_, slot_, fabric::Opcode::CompareSwap, cur, v, Order::Relaxed);
    if (old == cur) return;
    cur = old;
  }
}

}  // namespace loom::coherence
