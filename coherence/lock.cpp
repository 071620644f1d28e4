// Queue locks (MCS) over fabric atomics; no lock server. The tail word is a sync-object slot at
// the lock's home, followed by the notices the last holder left; each thread has kMaxHeld
// queue nodes (16 bytes: successor name, grant flag) in its process's synchronization memory.
// lock() is an acquire, unlock() a release.
#include <bit>
#include <cstring>

#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/stall.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::coherence {

namespace {

// Thread slots name a thread's queue-lock nodes; process-wide so they survive Spaces.
std::mutex g_slot_mu;
std::array<bool, kMaxThreads> g_slot_used{};
struct SlotGuard {
  int slot = -1;
  ~SlotGuard() {
    if (slot < 0) return;
    std::lock_guard<std::mutex> g(g_slot_mu);
    g_slot_used[static_cast<size_t>(slot)] = false;
  }
};
thread_local SlotGuard t_slot;

int thread_slot() {
  if (t_slot.slot >= 0) return t_slot.slot;
  std::lock_guard<std::mutex> g(g_slot_mu);
  for (int i = 0; i < kMaxThreads; ++i)
    if (!g_slot_used[static_cast<size_t>(i)]) {
      g_slot_used[static_cast<size_t>(i)] = true;
      t_slot.slot = i;
      return i;
    }
  fail("coherence: more than ", kMaxThreads, " threads use shared regions at once");
}

struct Held {
  Space* space;
  uint32_t slot;
  int depth;
};
thread_local std::array<Held, kMaxHeld> t_held;
thread_local int t_nheld = 0;
thread_local uint32_t t_depth_used = 0;  // bitmask of queue nodes in use by this thread

int held_index(Space* s, uint32_t slot) {
  for (int i = 0; i < t_nheld; ++i)
    if (t_held[static_cast<size_t>(i)].space == s && t_held[static_cast<size_t>(i)].slot == slot) return i;
  return -1;
}

// A queue node's name: rank << 32 | (index + 1); 0 is "none". Read from the wire: checked.
uint64_t node_name(int rank, size_t idx) { return (static_cast<uint64_t>(rank) << 32) | (idx + 1); }
void split_node_name(uint64_t name, int nprocs, uint32_t lock, const char* what, int& rank, size_t& idx) {
  uint64_t r = name >> 32, i = (name & 0xffffffffu) - 1;
  if (r >= static_cast<uint64_t>(nprocs) || i >= static_cast<uint64_t>(kMaxThreads) * kMaxHeld)
    fail("coherence: lock ", lock, ": ", what, " ", name, " (corrupt)");
  rank = static_cast<int>(r);
  idx = static_cast<size_t>(i);
}

}  // namespace

Lock Space::make_lock(const std::source_location& where) {
  rt_.collectives().enter("Space::make_lock", where);
  Impl& I = *impl_;
  if (I.sync.next_slot >= cfg_.sync_objects) fail("coherence: more than ", cfg_.sync_objects, " locks and atomic words (LOOM_COHERENCE_SYNC_OBJECTS)");
  Lock l;
  l.bind(this, I.sync.next_slot++, I.n);
  return l;
}

void Lock::lock() { take(false); }
bool Lock::try_lock() { return take(true); }

// Pairs with the predecessor's grant WRITE in unlock(). A predecessor that is gone (it left or
// died holding or awaiting the lock) never grants: checked between sleeps, and named.
void Space::Impl::wait_for_grant(const uint64_t* q, int prank, uint32_t slot, int home) {
  std::atomic_ref<uint64_t> granted(const_cast<uint64_t&>(q[1]));
  wait::Backoff b(kHandoffYields);
  wait::StallWatch stall;
  while (granted.load(std::memory_order_acquire) == 0) {
    if (b.should_sleep()) rt.peers().check(prank, "coherence: lock ", slot, " is lost: the rank ahead of this thread in its queue");
    b.pause();
    stall.check([&] {
      return "coherence: Lock::lock waits for lock " + std::to_string(slot) + " (home rank " + std::to_string(home) +
             "), which rank " + std::to_string(prank) + " holds or waits for ahead of this thread";
    });
  }
}

// Swings the lock's tail to this thread's queue node (try_only: from an empty queue only, else
// returns false having changed nothing), waits for a predecessor's grant, then acquires.
bool Lock::take(bool try_only) {
  if (space_ == nullptr) fail("coherence: lock() on a Lock not made by Space::make_lock");
  Space::Impl& I = *space_->impl_;
  if (held_index(space_, slot_) >= 0) {
    if (try_only) return false;
    fail("coherence: this thread already holds lock ", slot_);
  }
  if (t_nheld >= kMaxHeld) fail("coherence: a thread may hold at most ", kMaxHeld, " locks");
  const int depth = std::countr_one(t_depth_used);
  const size_t idx = I.sync.qnode_index(thread_slot(), depth);
  uint64_t* q = I.sync.qnode_local(idx);
  std::atomic_ref<uint64_t>(q[0]).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(q[1]).store(0, std::memory_order_release);
  const uint64_t me = node_name(I.rank, idx);
  const uint64_t tail = I.sync.slot_addr(home_, slot_);
  region::InRuntime ir;
  uint64_t pred;
  int prank = -1;
  {
    // Swing the tail to our node; a predecessor learns our name from one WRITE.
    LaneGuard lane(I.lanes);
    uint64_t guess = 0;
    while ((pred = lane->cas(home_, tail, I.sync.rkey(home_), guess, me)) != guess) {
      if (try_only) return false;
      guess = pred;
    }
    if (pred != 0) {
      size_t pidx;
      split_node_name(pred, I.n, slot_, "names queue node", prank, pidx);
      lane->set_word(Scratch::kQueueNode, me);
      lane->post(prank, fabric::Opcode::Write, Scratch::kQueueNode, 8, I.sync.qnode_addr(prank, pidx), I.sync.rkey(prank));
      lane->wait();
    }
  }
  if (pred != 0) I.wait_for_grant(q, prank, slot_, home_);
  t_depth_used |= 1u << depth;
  t_held[static_cast<size_t>(t_nheld++)] = Held{space_, slot_, depth};
  // Acquire: the notices the last holder left with the lock.
  std::lock_guard<std::mutex> g(I.fence.mu);
  LaneGuard lane(I.lanes);
  const size_t len = I.notice_cap_bytes();
  lane->post(home_, fabric::Opcode::Read, Scratch::kNoticesIn, static_cast<uint32_t>(len), tail + 64, I.sync.rkey(home_));
  lane->wait();
  I.acquire_wire(std::span<const uint8_t>(lane->bytes(Scratch::kNoticesIn), len), "lock ", slot_);
  return true;
}

// Hands the lock on: swings the tail back if nobody queued, else waits for the successor's
// name and grants it (fence.mu held; the notices already went with the lock).
void Space::Impl::hand_on_lock(Lane& l, uint64_t* q, uint64_t me, int home, uint32_t slot, uint64_t tail) {
  uint64_t next = std::atomic_ref<uint64_t>(q[0]).load(std::memory_order_acquire);
  if (next == 0) {
    l.post(home, fabric::Opcode::CompareSwap, Scratch::kResult, 8, tail, sync.rkey(home), me, 0);
    l.wait();
    if (l.word(Scratch::kResult) == me) return;
  } else {
    l.wait();
  }
  // Pairs with the successor's WRITE of its name in lock().
  std::atomic_ref<uint64_t> nx(q[0]);
  wait::Backoff b(kHandoffYields);
  wait::StallWatch stall;
  while ((next = nx.load(std::memory_order_acquire)) == 0) {
    b.pause();
    stall.check([&] { return "coherence: Lock::unlock of lock " + std::to_string(slot) + " waits for its next holder to name itself"; });
  }
  int nrank;
  size_t nidx;
  split_node_name(next, n, slot, "successor", nrank, nidx);
  l.set_word(Scratch::kGrant, 1);
  l.post(nrank, fabric::Opcode::Write, Scratch::kGrant, 8, sync.qnode_addr(nrank, nidx) + 8, sync.rkey(nrank));
  l.wait();
}

void Lock::unlock() {
  if (space_ == nullptr) fail("coherence: unlock() on a Lock not made by Space::make_lock");
  Space::Impl& I = *space_->impl_;
  const int at = held_index(space_, slot_);
  if (at < 0) fail("coherence: unlock of lock ", slot_, ", which this thread does not hold");
  const int depth = t_held[static_cast<size_t>(at)].depth;
  const size_t idx = I.sync.qnode_index(thread_slot(), depth);
  const uint64_t tail = I.sync.slot_addr(home_, slot_);
  region::InRuntime ir;
  {
    std::lock_guard<std::mutex> g(I.fence.mu);
    I.release_locked();
    LaneGuard lane(I.lanes);
    // The notices go with the lock, before the tail swings or the grant (same QP to the home).
    size_t len = I.serialize_notices(lane->bytes(Scratch::kNoticesOut));
    lane->post(home_, fabric::Opcode::Write, Scratch::kNoticesOut, static_cast<uint32_t>(len), tail + 64, I.sync.rkey(home_));
    I.hand_on_lock(*lane, I.sync.qnode_local(idx), node_name(I.rank, idx), home_, slot_, tail);
  }
  t_depth_used &= ~(1u << depth);
  t_held[static_cast<size_t>(at)] = t_held[static_cast<size_t>(t_nheld - 1)];
  --t_nheld;
}

}  // namespace loom::coherence
