#include "loom/dsm/signal/offload/channel.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/futex.hpp"
#include "loom/dsm/signal/transmitter.hpp"

namespace loom::signal::offload {
namespace {
constexpr uint64_t kMark = 1ull << 63;  // a signaled post's wr_id: the mark and its tag's sequence
}

Channel::Channel(Transmitter& tx, Offloader& off, uint32_t depth, uint32_t interval, uint32_t way)
    : tx_(tx),
      qp_(tx.qp()),
      cq_(tx.cq()),
      off_(off),
      interval_(interval),
      commands_(std::max(off.commands(), std::bit_ceil(2 * depth))),
      tags_(std::bit_ceil(std::max<uint32_t>(2, depth))),
      credits_(depth) {
  exec_node_.channel = this;
  comp_node_.channel = this;
  exec_node_.worker = comp_node_.worker = way % off.workers();
}

Channel::~Channel() {
  // The Transmitter flushed: nothing is claimed that is not complete. The threads drop the
  // queues on their next look; their compare-and-swap that clears the bit is their last touch.
  wait::Backoff b;
  while (commands_.active() || tags_.active()) b.pause();
}

Posted Channel::submit(const fabric::SendWr& wr, bool force_signal) {
  if (fabric::check_send(wr, qp_.caps()) != fabric::PostResult::Ok ||
      (wr.inline_data && wr.local.length > Command::kInlineBytes))
    return Posted{fabric::PostResult::InvalidArgument, 0};
  const CommandQueue::Claim claim = commands_.claim();
  Command& c = commands_.slot_for(claim.ticket);
  c.wr = wr;
  c.force_signal = force_signal;
  // Inline data is the caller's to reuse when post() returns: its bytes travel in the command.
  if (wr.inline_data && wr.local.length != 0)
    std::memcpy(c.payload, reinterpret_cast<const void*>(wr.local.addr), wr.local.length);
  commands_.publish(claim.ticket);
  if (claim.activate) off_.activate_executor(exec_node_);
  return Posted{fabric::PostResult::Ok, claim.ticket};
}

int Channel::execute(int budget) {
  int n = 0;
  while (n < budget) {
    const uint32_t k = gather(static_cast<uint32_t>(std::min(budget - n, static_cast<int>(kBatch))));
    if (k == 0) break;
    post_batch(k, true);
    n += static_cast<int>(k);
  }
  if (n == 0 && uncovered_ != 0 && tags_.in_flight() == 0 && commands_.peek_at(0) == nullptr) {
    post_marker();
    n = 1;
  }
  return n;
}

// The queue ran dry behind unsignaled posts (or refused ones) while a signal was in flight; that
// one has completed, and nothing covers them: a zero-length signaled WRITE does (it touches no
// memory and needs no key; refused too, its tag settles and counts them done).
void Channel::post_marker() {
  if (credits_.load(std::memory_order_acquire) == 0) return;  // a signal is in flight after all
  fabric::SendWr& wr = batch_[0];
  wr = fabric::SendWr{};
  wr.opcode = fabric::Opcode::Write;
  wr.signaled = true;
  wr.wr_id = kMark | tags_.next_sequence();
  count_posts(1, true);
  auto [seq, activate] = tags_.push(commands_.head(), since_ + 1);
  (void)seq;
  if (activate) off_.activate_completer(comp_node_);
  post_batch(1, false);
}

// Posts and signals are counted before the signal's tag goes in: a thread that sees the tag's
// flush number raised (the completer popped it: the tag queue's release and acquire) sees the
// counts. Counted after the post, they lagged a completion already polled — flush() returned and
// posts() was short by the last batch (the offloaded stress test over Soft-RoCE, 1 run in 3).
void Channel::count_posts(uint32_t n, bool signaled) {
  posts_.fetch_add(n, std::memory_order_relaxed);
  if (signaled) signaled_.fetch_add(1, std::memory_order_relaxed);
}

// Copies up to `budget` placed commands (as many as there are credits for) into batch_, and
// decides which is signaled: at most the last one of a batch. A post is signaled when the
// requester asked, every signal interval, on the last credit (so that one is in flight whenever
// the credits run out), and when no further command is placed (so that every ticket is covered
// whenever the queue runs dry). A signaled post's tag goes in now, before the post: on shared
// memory its completion may be polled before post_send returns.
uint32_t Channel::gather(uint32_t budget) {
  const uint32_t credits = credits_.load(std::memory_order_acquire);  // pairs with finish()'s release
  uint32_t n = 0;
  while (n < budget && n < credits) {
    Command* c = commands_.peek_at(n);
    if (c == nullptr) break;
    fabric::SendWr& wr = batch_[n];
    wr = c->wr;
    if (wr.inline_data && wr.local.length != 0) wr.local.addr = reinterpret_cast<uint64_t>(c->payload);
    ++n;
    const bool sig = c->force_signal || since_ + n >= interval_ || n == credits ||
                     (commands_.peek_at(n) == nullptr && tags_.in_flight() == 0);
    wr.signaled = sig;
    wr.wr_id = 0;
    if (sig) {
      wr.wr_id = kMark | tags_.next_sequence();
      count_posts(n, true);
      auto [seq, activate] = tags_.push(commands_.head() + n, since_ + n);
      (void)seq;
      if (activate) off_.activate_completer(comp_node_);
      return n;
    }
  }
  count_posts(n, false);
  return n;
}

// Posts batch_[0, n) in one call; the commands' slots go back to the requesters once posted
// (a marker has no command).
void Channel::post_batch(uint32_t n, bool commands) {
  credits_.fetch_sub(n, std::memory_order_relaxed);
  uint32_t done = 0;
  while (done < n) {
    const fabric::QueuePair::BatchResult r = qp_.post_send_batch(std::span<const fabric::SendWr>(batch_ + done, n - done));
    if (commands)
      for (size_t i = 0; i < r.accepted; ++i) commands_.pop();
    done += static_cast<uint32_t>(r.accepted);
    since_ += static_cast<uint32_t>(r.accepted);
    if (done == n) break;
    if (r.failure == fabric::PostResult::QueueFull) {
      // The provider's own queue is fuller than the credits say (entries not yet retired): it
      // frees them as completions are polled.
      complete();
      std::this_thread::yield();
      continue;
    }
    refuse(batch_[done], r.failure, batch_[n - 1].signaled, commands);
    if (commands) commands_.pop();
    ++done;
  }
  if (batch_[n - 1].signaled) {
    since_ = 0;
    uncovered_ = 0;
  } else {
    uncovered_ += n;  // refused ones too: a ticket is done once a later signal settles
  }
}

// A post the queue pair refused (it is not connected, or in the error state): a requester's is
// reported through the Transmitter's error handler (a marker, the executor's own, is not), and
// counted done with the signaled post that ends its batch (or the next one, or a marker, whose
// credits then do not include it): a queue pair that refuses posts fails those too, and the
// refused signaled post's tag is settled without a completion.
void Channel::refuse(const fabric::SendWr& wr, fabric::PostResult r, bool tag_pending, bool requested) {
  if (requested) {
    fabric::Completion c;
    c.opcode = wr.opcode;
    c.status = fabric::Status::WorkRequestFlushed;
    tx_.report_error(c, fabric::to_string(r));
  }
  if (wr.signaled) tags_.back().refused.store(true, std::memory_order_release);  // pairs with settle_refused()'s acquire
  else if (!tag_pending) credits_.fetch_add(1, std::memory_order_relaxed);
}

void Channel::finish(Tag& t) {
  credits_.fetch_add(t.credits, std::memory_order_release);  // pairs with execute()'s acquire
  tx_.raise_flush(t.flush_to);
  tags_.pop();
}

int Channel::settle_refused() {
  int n = 0;
  for (Tag* t = tags_.front(); t != nullptr && t->refused.load(std::memory_order_acquire); t = tags_.front()) {
    finish(*t);
    ++n;
  }
  return n;
}

int Channel::complete() {
  if (polling_.exchange(true, std::memory_order_acquire)) return 0;
  int n = settle_refused();
  fabric::Completion cs[16];
  const int k = cq_.poll(cs);
  for (int i = 0; i < k; ++i) {
    const fabric::Completion& c = cs[i];
    if (c.wr_id & kMark) {
      Tag* t = tags_.front();
      const uint64_t seq = c.wr_id & ~kMark;
      if (t == nullptr || seq != tags_.head()) {
        polling_.store(false, std::memory_order_release);
        fail("offload: a completion names tag ", seq, " of the queue pair to rank ", qp_.peer_rank(), ", expected ",
             tags_.head(), " (", tags_.in_flight(), " in flight)");
      }
      finish(*t);
    }
    if (c.status != fabric::Status::Success) tx_.report_error(c, nullptr);
    n += settle_refused() + 1;
  }
  polling_.store(false, std::memory_order_release);
  if (n > 0) notify_waiters();
  return n;
}

void Channel::notify_waiters() {
  // After raising the flush (seq_cst below): a waiter counts itself, then re-reads the flush.
  done_epoch_.fetch_add(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) != 0) wait::futex_wake_all(&done_epoch_);
}

void Channel::wait(uint64_t tag) {
  wait::Backoff b(4, 64);
  while (tx_.completed_flush() <= tag) {
    if (complete() > 0) continue;
    if (!b.should_sleep()) {
      b.spin_or_yield();
      continue;
    }
    const uint32_t epoch = done_epoch_.load(std::memory_order_seq_cst);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    if (tx_.completed_flush() <= tag) wait::futex_wait(&done_epoch_, epoch, std::chrono::milliseconds(100));
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace loom::signal::offload
