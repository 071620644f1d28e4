#pragma once
// The progress engine of the emulated wire: one thread per process that carries out each request
// between emulated nodes when the wire model says it takes effect, and reports its completion
// when the model says it completes. Requests of one queue pair take effect in order and complete
// in order (a lane per queue pair); lanes are independent, so a SEND waiting for the peer's
// receive holds back its own queue pair only, as on a NIC.
//
// Posting threads hand requests over through a lock-free queue and never wait for the engine.
// The engine spins (yielding) while its next event is close or a post may come soon, and sleeps
// on a futex otherwise: until shortly before its next event, or until a post wakes it.
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

#include "loom/dsm/fabric/shm/shm_internal.hpp"
#include "loom/dsm/fabric/shm/wire_model.hpp"

namespace loom::fabric::shm {

class ShmQp;

// The link of the engine's inbox, a queue of many producers and one consumer whose push is one
// exchange and one store (Vyukov's intrusive queue). Boost.Lockfree's queue allocates a node per
// push when its free list is empty, which a post from the coherence fault handler must not.
struct WireLink {
  std::atomic<WireLink*> next{nullptr};
};

class WireInbox {
 public:
  void push(WireLink* n);
  // The oldest request, or nullptr when there is none or a push is half done (try again later).
  WireLink* pop();

 private:
  std::atomic<WireLink*> head_{&stub_};  // the newest (producers)
  WireLink* tail_ = &stub_;              // the oldest (the consumer)
  WireLink stub_;
};

// A request on the wire: the work request as posted, its inline bytes captured at post time.
// Each queue pair owns a ring of them, made with it: posting allocates nothing (the coherence
// protocol posts from its fault handler).
struct WireOp : WireLink {
  std::atomic<bool> in_use{false};  // from its post until the engine is done with it
  ShmQp* qp = nullptr;
  SendWr wr;
  uint64_t seq = 0;  // its send-queue entry
  WireTimes at;
  uint64_t posted_at = 0;
  Status status = Status::Success;
  uint32_t byte_len = 0;
  bool has_inline = false;
  uint8_t inline_bytes[kMaxInline];
};

// The clock of the wire (steady, ns): one clock for every process on the host.
uint64_t wire_now();

class WireEngine {
 public:
  // Requests of one lane carried out for one event at most. A queue pair of send depth D needs
  // D + kBatch + 1 WireOps: once the completion of request r can be polled, the engine is done
  // with every request up to r - kBatch, and the poster is at most D requests ahead of r.
  static constexpr size_t kBatch = 64;

  // `cpus`: where the thread may run (the process's set before any thread was pinned: a thread
  // pinned to its creator's core would take turns with it).
  explicit WireEngine(const cpu_set_t& cpus);
  ~WireEngine();
  WireEngine(const WireEngine&) = delete;
  WireEngine& operator=(const WireEngine&) = delete;

  // Hands a request of `qp` to the engine. The caller orders the posts of one QP (its post lock,
  // or its single thread); the engine keeps that order.
  void post(ShmQp* qp, WireOp* op);
  // Drops qp's lane and what is queued on it, once all `posted` of its requests have left the
  // inbox; returns once the engine is not working on it.
  void forget(ShmQp* qp, uint64_t posted);
  // Requests handed over and not yet completed or dropped (for tests).
  uint64_t in_flight() const {
    return handed_.load(std::memory_order_relaxed) - finished_.load(std::memory_order_relaxed);
  }

 private:
  struct Lane {
    std::deque<WireOp*> effects;      // waiting to take effect
    std::deque<WireOp*> completions;  // waiting to complete
    uint64_t last_effect = 0, last_complete = 0;
    uint64_t drained = 0;  // requests taken from the inbox
    bool effect_due = false, completion_due = false;  // an event of that kind is in the heap
  };
  struct Event {
    uint64_t at;
    uint64_t order;
    ShmQp* qp;
    bool completion;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : order > o.order; }
  };

  void run();
  // Moves handed-over requests onto their lanes, their times raised to keep each lane's order.
  void drain();
  // Puts the lane's next event of that kind in the heap unless one is there.
  void schedule(ShmQp* qp, Lane& lane, bool completion);
  // Carries out the requests of the event's lane that are due, then settles them: completions
  // queued, what could not take effect (no receive yet) put back at the front.
  void handle(const Event& e);
  void settle(Lane& lane, bool completions, size_t done);
  // Waits until `at` (UINT64_MAX: for a while, then until a post), or until a post comes.
  void wait_for(uint64_t at);
  bool posted_since(uint64_t drained) const { return handed_.load(std::memory_order_seq_cst) != drained; }

  WireInbox inbox_;
  std::atomic<uint64_t> handed_{0};    // requests handed over (after their push)
  std::atomic<uint64_t> finished_{0};  // requests completed, or dropped
  std::atomic<uint64_t> drained_{0};   // requests moved onto lanes (under mu_; read by the spinning engine)
  std::atomic<uint32_t> wake_word_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};

  std::mutex mu_;  // the lanes and the heap: held by the engine while it works, and by forget()
  std::unordered_map<ShmQp*, Lane> lanes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_order_ = 0;
  std::vector<WireOp*> batch_;
  std::thread thread_;
};

}  // namespace loom::fabric::shm
