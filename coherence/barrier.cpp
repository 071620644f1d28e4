// The barrier over every thread of every process: the threads of a process meet locally; the
// last to arrive releases, exchanges write notices with the other processes by dissemination
// (in round k, to rank + 2^k and from rank - 2^k: after ceil(log2 n) rounds everyone holds the
// union of everyone's notices), and acquires them.
#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/stall.hpp"

namespace loom::coherence {

// One dissemination round: our notices into the partner's mailbox, then the epoch flag behind
// them on the same queue pair (the flag lands after the notices); then wait for our mailbox's.
// The flag's WRITE carries this process's collective call (its ticket) just before the epoch, so
// a partner in another collective call — one process made a collective the other did not — is
// an error naming both calls, in every mode (it costs 8 bytes).
void Space::Impl::exchange_notices(Lane& l, int k, int parity, uint64_t epoch, const runtime::CollectiveCall& call) {
  const int to = (rank + (1 << k)) % n;
  const int from = ((rank - (1 << k)) % n + n) % n;
  const size_t flag_off = sync.layout.mbox_bytes - 8;
  size_t len = serialize_notices_for_round(k, l.bytes(Scratch::kNoticesOut));
  l.post(to, fabric::Opcode::Write, Scratch::kNoticesOut, static_cast<uint32_t>(len), sync.mbox_addr(to, k, parity), sync.rkey(to));
  l.set_word(Scratch::kTicket, runtime::Collectives::ticket_of(call));
  l.set_word(Scratch::kEpoch, epoch);
  l.post(to, fabric::Opcode::Write, Scratch::kTicket, 16, sync.mbox_addr(to, k, parity) + flag_off - 8, sync.rkey(to));
  l.wait();
  uint8_t* box = sync.mbox_local(k, parity);
  // Pairs with the partner's flag WRITE, which its queue pair placed after the notices.
  std::atomic_ref<uint64_t> flag(*reinterpret_cast<uint64_t*>(box + flag_off));
  wait::Backoff b(kHandoffYields);
  wait::StallWatch stall;
  while (flag.load(std::memory_order_acquire) != epoch) {
    if (b.should_sleep()) {
      rt.peers().check(from, "coherence: barrier");
      rt.collectives().check_posted(call, rank, from);  // `from` in another collective call
    }
    b.pause();
    stall.check([&] {
      return "coherence: Space::barrier (" + rt.collectives().last().str() + ") waits for rank " + std::to_string(from) +
             ": is every process in Space::barrier? (LOOM_CHECK=on names the collective call each process is in)";
    });
  }
  rt.collectives().check_ticket(call, rank, from, std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(box + flag_off - 8)).load(std::memory_order_relaxed));
  std::lock_guard<std::mutex> ng(notices.mu);
  if (!notices.buffer.merge_wire(std::span<const uint8_t>(box, flag_off), static_cast<uint32_t>(n)))
    fail("coherence: barrier: malformed write notices from rank ", from);
}

// The processes' part, run by the last thread of this process to arrive.
void Space::Impl::global_barrier(const runtime::CollectiveCall& call) {
  region::InRuntime ir;
  std::lock_guard<std::mutex> g(fence.mu);
  release_locked();
  const uint64_t epoch = ++barrier.epoch;
  const int parity = static_cast<int>(epoch & 1);
  {
    LaneGuard lane(lanes);
    for (int k = 0; k < sync.layout.rounds; ++k) exchange_notices(*lane, k, parity, epoch, call);
  }
  // With no lane held: the acquire takes one when it needs it (a thread holds at most one; the
  // service thread's downgrade holds the other while it waits for a block mutex the acquire holds).
  acquire_locked(notices.buffer.min_wts());
}

// Waits for the process's other threads' arrival (barrier.mu held), saying so when it lasts: a
// program with fewer threads than loomrun --threads started would wait forever.
void Space::Impl::wait_for_threads(std::unique_lock<std::mutex>& lk, uint64_t gen, int threads) {
  const auto report = wait::stall_report_after();
  auto next = std::chrono::steady_clock::now() + report;
  if (report.count() == 0) next += std::chrono::hours(24 * 365);
  while (!barrier.cv.wait_until(lk, next,
                            [&] { return barrier.gen != gen; })) {
    log::warn("coherence: Space::barrier waits for this process's other worker threads: ", barrier.arrived, " of ", threads,
              " arrived (every worker thread, loomrun --threads ", threads, ", calls it)");
    next = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  }
}

void Space::barrier(const std::source_location& where) {
  Impl& I = *impl_;
  const int threads = rt_.threads_per_process();
  std::unique_lock<std::mutex> lk(I.barrier.mu);
  uint64_t gen = I.barrier.gen;
  if (++I.barrier.arrived < threads) {
    I.wait_for_threads(lk, gen, threads);
    if (I.barrier.error) std::rethrow_exception(I.barrier.error);
    return;
  }
  I.barrier.arrived = 0;
  lk.unlock();
  std::exception_ptr err;
  try {
    // The last thread to arrive, once per process.
    I.global_barrier(rt_.collectives().enter("Space::barrier", where));
  } catch (...) {
    err = std::current_exception();
  }
  lk.lock();
  I.barrier.error = err;
  ++I.barrier.gen;
  lk.unlock();
  I.barrier.cv.notify_all();
  if (err) std::rethrow_exception(err);
}

}  // namespace loom::coherence
