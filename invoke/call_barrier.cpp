#include "loom/invoke/call_barrier.hpp"

#include <cstring>
#include <string>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/stall.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

namespace {
size_t pad8(size_t n) { return (n + 7) & ~size_t{7}; }
}  // namespace

CallBarrier::CallBarrier(Invoker& inv) : inv_(inv), ranks_(inv.runtime().size()) {
  rounds_ = 0;
  while ((1 << rounds_) < ranks_) ++rounds_;
  Runtime& rt = inv_.runtime();
  mail_ = rt.heap().allocate(std::max<size_t>(8, slot_offset(rounds_, 0)));
  std::memset(mail_.addr, 0, mail_.size);
  out_ = rt.heap().allocate(slot_bytes());
  RemoteMemoryLocator mine{rt.rank(), rt.local_zone(), mail_.address(), mail_.size, mail_.rkey};
  peers_ = rt.bootstrap().allgather_value(mine);
}

CallBarrier::~CallBarrier() {
  inv_.runtime().heap().free(out_.addr);
  inv_.runtime().heap().free(mail_.addr);
}

size_t CallBarrier::slot_bytes() const {
  return sizeof(Counts) * static_cast<size_t>(ranks_) + pad8(static_cast<size_t>(ranks_)) + 8;
}

uint64_t CallBarrier::slot_offset(int round, int parity) const {
  return (static_cast<uint64_t>(round) * 2 + static_cast<uint64_t>(parity)) * slot_bytes();
}

void CallBarrier::arrive(const std::source_location& where) {
  const int threads = inv_.threads();
  inv_.flush();
  const uint64_t gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
    arrived_.store(0, std::memory_order_relaxed);
    lead(where);
    generation_.store(gen + 1, std::memory_order_seq_cst);  // pairs with the waiters' acquire
    inv_.bells().ring_process(inv_.runtime().rank());    // waiters asleep on their doorbells
    return;
  }
  wait::Backoff b = inv_.idle_backoff();
  wait::StallWatch stall;
  auto released = [&] { return generation_.load(std::memory_order_acquire) != gen; };
  while (!released()) {
    if (inv_.progress() > 0) {
      b = inv_.idle_backoff();
      stall.reset();
      continue;
    }
    inv_.idle(b, released);
    stall.check([&] {
      const int arrived = arrived_.load();
      if (arrived == 0)  // the last thread arrived and leads: the other processes are awaited
        return std::string("invoke: Invoker::barrier waits for the other processes");
      return "invoke: Invoker::barrier waits for this process's other worker threads: " + std::to_string(arrived) +
             " of " + std::to_string(threads) + " arrived (every worker thread, loomrun --threads " +
             std::to_string(threads) + ", calls it)";
    });
  }
}

void CallBarrier::lead(const std::source_location& where) {
  // Once per process; compared in the waves' messages, not through the bootstrap, whose waits
  // would run no calls.
  runtime::Collectives& collectives = inv_.runtime().collectives();
  const runtime::CollectiveCall call = collectives.note("Invoker::barrier", where);
  std::vector<Counts> prev;
  for (;;) {
    inv_.progress();
    Counts mine = inv_.call_counts();
    mine.ticket = runtime::Collectives::ticket_of(call);
    std::vector<Counts> all = wave(mine);
    std::vector<uint64_t> tickets;
    for (const Counts& c : all) tickets.push_back(c.ticket);
    collectives.check_tickets(call, tickets);
    Counts total;
    for (const Counts& c : all) total.sent += c.sent, total.executed += c.executed;
    if (!prev.empty()) {
      uint64_t prev_executed = 0;
      for (const Counts& c : prev) prev_executed += c.executed;
      if (prev_executed == total.sent) return;  // every process decides alike: they hold the same counts
    }
    prev = std::move(all);
  }
}

// One wave: every process's counts, by dissemination (in round k to rank + 2^k, from rank - 2^k).
std::vector<CallBarrier::Counts> CallBarrier::wave(Counts mine) {
  const int me = inv_.runtime().rank();
  std::vector<Counts> all(static_cast<size_t>(ranks_));
  std::vector<uint8_t> known(static_cast<size_t>(ranks_), 0);
  all[static_cast<size_t>(me)] = mine;
  known[static_cast<size_t>(me)] = 1;
  const uint64_t epoch = ++epoch_;
  for (int k = 0; k < rounds_; ++k) exchange(k, epoch, all, known);
  return all;
}

void CallBarrier::exchange(int round, uint64_t epoch, std::vector<Counts>& all, std::vector<uint8_t>& known) {
  const int me = inv_.runtime().rank();
  const int to = (me + (1 << round)) % ranks_;
  const int from = ((me - (1 << round)) % ranks_ + ranks_) % ranks_;
  const int parity = static_cast<int>(epoch & 1);
  const size_t counts_len = sizeof(Counts) * all.size();
  const size_t flag_at = slot_bytes() - 8;
  uint8_t* out = out_.bytes();
  std::memcpy(out, all.data(), counts_len);
  std::memcpy(out + counts_len, known.data(), known.size());
  std::memcpy(out + flag_at, &epoch, 8);
  // One WRITE: the provider places its last 8 bytes (the epoch) last.
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  wr.local = fabric::Sge{out_.address(), static_cast<uint32_t>(slot_bytes()), out_.lkey};
  const RemoteMemoryLocator& peer = peers_[static_cast<size_t>(to)];
  wr.remote_addr = peer.addr + slot_offset(round, parity);
  wr.rkey = peer.rkey;
  signal::Transmitter& tx = inv_.tx(to);
  signal::Posted p = tx.post(wr, true);
  if (!p.ok()) fail("invoke: barrier: writing to rank ", to, " failed: ", fabric::to_string(p.result));
  tx.wait(p.tag);  // out_ is reused by the next round
  inv_.bells().ring_process(to, tx);
  uint8_t* slot = mail_.bytes() + slot_offset(round, parity);
  // Pairs with the partner's WRITE, whose epoch lands after its counts.
  wait_for_flag(from, reinterpret_cast<uint64_t*>(slot + flag_at), epoch);
  const auto* theirs = reinterpret_cast<const Counts*>(slot);
  const uint8_t* their_known = slot + counts_len;
  for (size_t r = 0; r < all.size(); ++r)
    if (their_known[r] != 0) {
      all[r] = theirs[r];
      known[r] = 1;
    }
}

void CallBarrier::wait_for_flag(int peer, uint64_t* flag, uint64_t want) {
  std::atomic_ref<uint64_t> w(*flag);
  wait::Backoff b = inv_.idle_backoff();
  wait::StallWatch stall;
  auto arrived = [&] { return w.load(std::memory_order_acquire) == want; };
  while (!arrived()) {
    if (b.should_sleep()) inv_.runtime().peers().check(peer, "invoke: barrier");
    if (inv_.progress() > 0) {
      b = inv_.idle_backoff();
      stall.reset();
      continue;
    }
    inv_.idle(b, arrived);
    stall.check([&] {
      return "invoke: Invoker::barrier waits for rank " + std::to_string(peer) + " (is every worker thread of rank " +
             std::to_string(peer) + " in Invoker::barrier?)";
    });
  }
}

}  // namespace loom::invoke

