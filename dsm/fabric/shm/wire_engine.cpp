// The emulated wire's progress thread: the inbox from the posting threads, lanes per queue pair,
// one heap of due events.
#include "loom/dsm/fabric/shm/wire_engine.hpp"

#include <sys/prctl.h>

#include <chrono>
#include <limits>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/futex.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"

namespace loom::fabric::shm {

namespace {
// Closer than this to its next event, the engine spins (yielding) instead of sleeping: a timed
// wake-up here comes tens of microseconds late, longer than a whole InfiniBand round trip.
constexpr uint64_t kSpinNs = 200'000;
// How long the engine watches for the next post once nothing is on the wire (a request answered
// by another comes back within a round trip, and a futex wake-up costs more than that).
constexpr uint64_t kIdleSpinNs = 100'000;
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
}  // namespace

uint64_t wire_now() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void WireInbox::push(WireLink* n) {
  n->next.store(nullptr, std::memory_order_relaxed);
  // The exchange orders producers; the store links the previous newest to this one, and pairs
  // with the consumer's acquire load of `next`.
  WireLink* prev = head_.exchange(n, std::memory_order_acq_rel);
  prev->next.store(n, std::memory_order_release);
}

WireLink* WireInbox::pop() {
  WireLink* tail = tail_;
  WireLink* next = tail->next.load(std::memory_order_acquire);
  if (tail == &stub_) {
    if (next == nullptr) return nullptr;
    tail_ = tail = next;
    next = next->next.load(std::memory_order_acquire);
  }
  if (next != nullptr) {
    tail_ = next;
    return tail;
  }
  if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // a push is half done
  push(&stub_);  // the last request leaves once the stub stands behind it
  next = tail->next.load(std::memory_order_acquire);
  if (next == nullptr) return nullptr;
  tail_ = next;
  return tail;
}

WireEngine::WireEngine(const cpu_set_t& cpus) {
  thread_ = std::thread([this, cpus] {
    sched_setaffinity(0, sizeof cpus, &cpus);
    prctl(PR_SET_NAME, "loom-wire", 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);  // this thread's timed waits end on time
    run();
  });
}

WireEngine::~WireEngine() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_word_.fetch_add(1, std::memory_order_seq_cst);
  wait::futex_wake_all(&wake_word_);
  thread_.join();
  // What is left belongs to queue pairs that are gone (their rings with them).
}

void WireEngine::post(ShmQp* qp, WireOp* op) {
  op->qp = qp;
  inbox_.push(op);
  // Pairs with wait_for(): the engine sets `sleeping_` and then reads `handed_` (both
  // sequentially consistent), so it sees this request or this thread sees it asleep.
  handed_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    wake_word_.fetch_add(1, std::memory_order_seq_cst);
    wait::futex_wake_all(&wake_word_);
  }
}

void WireEngine::forget(ShmQp* qp, uint64_t posted) {
  std::unique_lock<std::mutex> g(mu_);
  // Its requests still in the inbox first (behind another thread's push that is half done, they
  // wait until that push ends).
  for (drain(); posted != 0 && lanes_[qp].drained != posted; drain()) {
    g.unlock();
    std::this_thread::yield();
    g.lock();
  }
  auto it = lanes_.find(qp);
  if (it == lanes_.end()) return;
  finished_.fetch_add(it->second.effects.size() + it->second.completions.size(), std::memory_order_relaxed);
  lanes_.erase(it);  // its events in the heap find no lane and are dropped
}

void WireEngine::drain() {
  while (WireLink* l = inbox_.pop()) {
    auto* op = static_cast<WireOp*>(l);
    drained_.fetch_add(1, std::memory_order_relaxed);
    Lane& lane = lanes_[op->qp];
    ++lane.drained;
    op->at.effect = std::max(op->at.effect, lane.last_effect);
    op->at.complete = std::max(op->at.complete, std::max(lane.last_complete, op->at.effect));
    lane.last_effect = op->at.effect;
    lane.last_complete = op->at.complete;
    lane.effects.push_back(op);
    schedule(op->qp, lane, false);
  }
}

void WireEngine::schedule(ShmQp* qp, Lane& lane, bool completion) {
  auto& q = completion ? lane.completions : lane.effects;
  bool& due = completion ? lane.completion_due : lane.effect_due;
  if (due || q.empty()) return;
  due = true;
  events_.push(Event{completion ? q.front()->at.complete : q.front()->at.effect, next_order_++, qp, completion});
}

void WireEngine::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    uint64_t next;
    {
      std::lock_guard<std::mutex> g(mu_);
      drain();
      while (!events_.empty() && events_.top().at <= wire_now()) {
        const Event e = events_.top();
        events_.pop();
        handle(e);
      }
      next = events_.empty() ? kNever : events_.top().at;
    }
    wait_for(next);
  }
}

void WireEngine::wait_for(uint64_t at) {
  const uint64_t now = wire_now(), seen = drained_.load(std::memory_order_relaxed);
  if (at <= now) return;
  // Close: spin, watching the clock and the inbox.
  const uint64_t spin_until = at == kNever ? now + kIdleSpinNs : at;
  if (spin_until - now <= kSpinNs) {
    for (uint32_t i = 0; wire_now() < spin_until && !posted_since(seen); ++i) {
      if (i % 64 == 63) std::this_thread::yield();
      else wait::cpu_relax();
    }
    if (at != kNever || posted_since(seen)) return;
  }
  // Far, or idle for a while: sleep until shortly before the event, or until a post wakes us.
  const uint32_t word = wake_word_.load(std::memory_order_seq_cst);
  sleeping_.store(true, std::memory_order_seq_cst);
  if (!posted_since(seen) && !stop_.load(std::memory_order_seq_cst)) {
    const uint64_t left = at == kNever ? 1'000'000'000 : (at - wire_now() > kSpinNs ? at - wire_now() - kSpinNs / 2 : 0);
    if (left > 0) wait::futex_wait(&wake_word_, word, std::chrono::nanoseconds(left));
  }
  sleeping_.store(false, std::memory_order_relaxed);
}

void WireEngine::handle(const Event& e) {
  auto it = lanes_.find(e.qp);
  if (it == lanes_.end()) return;  // forgotten
  Lane& lane = it->second;
  auto& q = e.completion ? lane.completions : lane.effects;
  (e.completion ? lane.completion_due : lane.effect_due) = false;
  // Every request of the lane due by now, in order.
  const uint64_t now = wire_now();
  auto due = [&](const WireOp& op) { return (e.completion ? op.at.complete : op.at.effect) <= now; };
  while (!q.empty() && batch_.size() < kBatch && due(*q.front())) {
    batch_.push_back(q.front());
    q.pop_front();
  }
  size_t done = 0;
  for (; done < batch_.size(); ++done) {
    if (e.completion) e.qp->wire_complete(*batch_[done]);
    else if (!e.qp->wire_effect(*batch_[done], wire_now())) break;  // no receive yet: later
  }
  settle(lane, e.completion, done);
  schedule(e.qp, lane, false);
  schedule(e.qp, lane, true);
}

void WireEngine::settle(Lane& lane, bool completions, size_t done) {
  for (size_t i = batch_.size(); i > done; --i) lane.effects.push_front(batch_[i - 1]);
  for (size_t i = 0; i < done; ++i) {
    WireOp* op = batch_[i];
    if (!completions && (op->wr.signaled || op->status != Status::Success)) {
      op->at.complete = std::max(op->at.complete, lane.last_complete);
      lane.last_complete = op->at.complete;
      lane.completions.push_back(op);
    } else {
      // Completed, or an unsignaled success: its slot may take a new request (pairs with the
      // acquire load in ShmQp::post_wired).
      op->in_use.store(false, std::memory_order_release);
      finished_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  batch_.clear();
}

}  // namespace loom::fabric::shm
