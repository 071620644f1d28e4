// The barrier over every thread of every process: the threads of a process meet locally; the
// last to arrive releases, exchanges write notices with the other processes by dissemination
// (in round k, to rank + 2^k and from rank - 2^k: after ceil(log2 n) rounds everyone holds the
// union of everyone's notices), and acquires them.
#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::coherence {

// One dissemination round: our notices into the partner's mailbox, then the epoch flag behind
// them on the same queue pair (the flag lands after the notices); then wait for our mailbox's.
void Space::Impl::exchange_notices(Lane& l, int k, int parity, uint64_t epoch) {
  const int to = (rank + (1 << k)) % n;
  const int from = ((rank - (1 << k)) % n + n) % n;
  const size_t flag_off = sl.mbox_bytes - 8;
  size_t len = serialize_notices(l.bytes(Scratch::kNoticesOut));
  l.post(to, fabric::Opcode::Write, Scratch::kNoticesOut, static_cast<uint32_t>(len), mbox_addr(to, k, parity), sync_rkey(to));
  l.set_word(Scratch::kEpoch, epoch);
  l.post(to, fabric::Opcode::Write, Scratch::kEpoch, 8, mbox_addr(to, k, parity) + flag_off, sync_rkey(to));
  l.wait();
  uint8_t* box = mbox_local(k, parity);
  // Pairs with the partner's flag WRITE, which its queue pair placed after the notices.
  std::atomic_ref<uint64_t> flag(*reinterpret_cast<uint64_t*>(box + flag_off));
  wait::Backoff b(kHandoffYields);
  while (flag.load(std::memory_order_acquire) != epoch) {
    if (!rt.provider().peer_alive(from)) fail("dsm: barrier: rank ", from, " is gone");
    b.pause();
  }
  std::lock_guard<std::mutex> ng(notice_mu);
  if (!notices.merge_wire(std::span<const uint8_t>(box, flag_off), static_cast<uint32_t>(n)))
    fail("dsm: barrier: malformed write notices from rank ", from);
}

// The processes' part, run by the last thread of this process to arrive.
void Space::Impl::global_barrier() {
  region::InRuntime ir;
  std::lock_guard<std::mutex> g(fence_mu);
  release_locked();
  const uint64_t epoch = ++barrier_epoch;
  const int parity = static_cast<int>(epoch & 1);
  LaneGuard lane(lanes);
  for (int k = 0; k < sl.rounds; ++k) exchange_notices(*lane, k, parity, epoch);
  acquire_locked(notices.min_wts());
}

void Space::barrier() {
  Impl& I = *impl_;
  const int threads = rt_.threads_per_process();
  std::unique_lock<std::mutex> lk(I.bar_mu);
  uint64_t gen = I.bar_gen;
  if (++I.bar_arrived < threads) {
    I.bar_cv.wait(lk, [&] { return I.bar_gen != gen; });
    if (I.bar_error) std::rethrow_exception(I.bar_error);
    return;
  }
  I.bar_arrived = 0;
  lk.unlock();
  std::exception_ptr err;
  try {
    I.global_barrier();
  } catch (...) {
    err = std::current_exception();
  }
  lk.lock();
  I.bar_error = err;
  ++I.bar_gen;
  lk.unlock();
  I.bar_cv.notify_all();
  if (err) std::rethrow_exception(err);
}

}  // namespace loom::coherence
