#pragma once
// The sending side of remote invocation (seed 000 §4.4.1): a Messenger is one channel from a
// sender thread to a destination thread, writing records into chunks the sender controls in
// the receiver's memory; a MessengerGlobal holds one sender thread's Messengers.
// messenger.cpp: the ring and records; messenger_async.cpp: the RetryAsync queue.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/signal/transmitter.hpp"
#include "loom/invoke/bell_checks.hpp"
#include "loom/invoke/config.hpp"
#include "loom/invoke/frame_spec.hpp"
#include "loom/invoke/synchronizer.hpp"

namespace loom::invoke {
class Aggregator;
class Invoker;
class MessengerGlobal;
}

namespace loom::invoke {

// The sending side of one channel: this thread to one destination thread (seed 000 §4.4.1).
// Owned by one sender thread; helper threads touch it only to finish RetryAsync calls, under
// its lock and only while the owner is not blocked in it.
class Messenger {
 public:
  // `owner` is the MessengerGlobal of the thread that owns it (its sent count, for the barrier;
  // its note of queued calls).
  Messenger(Invoker& inv, Thread dest, uint64_t serial, MessengerGlobal* owner);
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  Thread dest() const { return dest_; }
  // Writes one frame. flush_at = 0 sends it at once (write mode); otherwise frames accumulate in
  // one record until it holds flush_at bytes (trad aggregation) or flush() is called.
  bool call(const FrameSpec& f, OnFull on_full, size_t flush_at = 0, Synchronizer* transmitted = nullptr) {
    // The aggregating fast path: one more frame into the open record.
    if (open_ && transmitted == nullptr && !blocked_ && !async_pending_.load(std::memory_order_acquire)) {
      size_t n = f.bytes();
      if (used_ + n + 8 <= cap_) {
        count_sent(1);
        f.fill(rec_ + used_, n);
        used_ += n;
        if (used_ + 8 >= flush_at) flush();
        return true;
      }
    }
    count_sent(1);  // before the call can be seen: the barrier's counts never show it run but not made
    const bool ok = call_slow(f, on_full, flush_at, transmitted);
    if (!ok) count_sent(-1);
    return ok;
  }
  // Calls made through this channel (or another path of its owner thread: the Aggregator's kept
  // calls when they go out). Only the owner thread writes it.
  inline void count_sent(int64_t d);
  // Sends the open record, if any.
  void flush();
  bool has_open_record() const { return open_; }
  // A frame prepared elsewhere as a whole record (head, frame, tail) in registered memory:
  // sent in place (head and tail stamped now) if there is room; false otherwise.
  bool send_record(const memory::RDMAMemory& rec, size_t len);
  // Finishes queued RetryAsync calls as far as space allows; returns true if none remain.
  bool drain_async();
  bool async_pending() const { return async_pending_.load(std::memory_order_acquire); }
  // Frees retired records whose writes completed.
  void reclaim();

  size_t chunks() const { return ring_.size(); }
  size_t max_frame() const;
  uint64_t records() const { return records_; }
  uint64_t growths() const { return growths_; }
  uint64_t consumed() const;
  uint64_t offset() const { return g_; }

 private:
  struct Slot {
    uint64_t addr;
    uint32_t rkey;
    uint64_t closed_at;  // global offset at which this chunk was last closed (0: never)
    uint8_t* direct;     // the chunk mapped here (Config::direct), or nullptr: RDMA WRITE
  };
  bool call_slow(const FrameSpec& f, OnFull on_full, size_t flush_at, Synchronizer* transmitted);
  void setup();
  bool chunk_free(size_t j) const { return ring_[j].closed_at <= consumed(); }
  std::vector<Slot> allocate_chunks(uint32_t count, bool first);
  uint8_t* reserve(size_t n, size_t flush_at);
  bool open_record(size_t n, size_t flush_at);
  bool rotate(size_t need);
  // Writes len bytes at `offset` of the current chunk, the last 8 last: in place where the
  // chunk is mapped here, else by one RDMA WRITE — from `src` (registered, sets *tag) or inline
  // when src is null (small control words).
  void place(size_t offset, const uint8_t* bytes, size_t len, const memory::RDMAMemory* src, uint64_t* tag = nullptr);
  bool enqueue_async(const FrameSpec& f, size_t n, Synchronizer* transmitted);

  Invoker& inv_;
  Thread dest_;
  uint64_t serial_;
  MessengerGlobal* owner_;
  signal::Transmitter& tx_;
  size_t chunk_size_;
  std::vector<Slot> ring_;
  size_t cur_ = 0;
  size_t pos_ = 0;
  uint64_t g_ = wire::kChunkHeader;  // global offset of the next record (never 0: 0 means "never closed")
  memory::RDMAMemory control_;      // the receiver pushes its consumed offset here
  memory::LinearCircularAllocator staging_;

  // The open record: frames are serialized directly into it — in the receiver's chunk when it
  // is mapped here, else in registered staging memory that one WRITE sends.
  bool open_ = false;
  uint8_t* rec_ = nullptr;
  memory::LinearCircularAllocator::Segment seg_;
  size_t used_ = 0;
  size_t cap_ = 0;
  size_t min_record_ = 0;
  std::vector<Synchronizer*> batch_syncs_;

  // RetryAsync queue (records in registered memory, stamped when sent).
  struct Queued {
    memory::RDMAMemory rec;
    size_t len;
    Synchronizer* transmitted;
  };
  std::mutex mu_;
  std::deque<Queued> async_;
  std::atomic<bool> async_pending_{false};
  bool blocked_ = false;  // owner is inside a Retry wait (helpers keep off)
  std::deque<std::pair<uint64_t, memory::RDMAMemory>> retired_;

  uint64_t records_ = 0;
  uint64_t growths_ = 0;
  friend class Invoker;
};

// One sender thread's Messengers, created on first use of each destination (seed 000's
// RDMAMessengerGlobal).
class MessengerGlobal {
 public:
  explicit MessengerGlobal(Invoker& inv) : inv_(inv) {}
  inline Messenger& to(Thread dest);
  void flush();
  bool drain_async();
  // No open record and nothing queued: everything this thread called has been handed to the fabric.
  bool quiet() const;
  std::vector<std::unique_ptr<Messenger>>& all() { return messengers_; }
  // Some Messenger of this thread queued calls (RetryAsync) that may not have gone out yet; set
  // by this thread, cleared by its drain_async() once none are left.
  bool maybe_async() const { return maybe_async_; }
  void note_async() { maybe_async_ = true; }
  // Ovfl Aggregators of this thread keeping calls (their Messengers were full): every progress()
  // of this thread sends what the rings take now, so a wait for such a call ends once the
  // receiver catches up (a Synchronizer waited on after a flush() that could not send it all).
  void note_keeping(Aggregator* a);
  void forget(Aggregator* a);
  bool keeping() const { return !keeping_.empty(); }
  void send_kept();
  // Calls this thread made (through any of its Messengers, or send-based); only this thread
  // writes it.
  uint64_t sent() const { return sent_.load(std::memory_order_acquire); }
  void count_sent(int64_t d) {
    sent_.store(sent_.load(std::memory_order_relaxed) + static_cast<uint64_t>(d), std::memory_order_release);
  }
  // This thread's checks of doorbells out of reach (made at its first).
  BellChecks& bell_checks();
  bool checking() const { return checks_ != nullptr && checks_->pending(); }
  // At the Invoker's teardown, while its queue pairs exist: waits for the checks in flight.
  void end_checks() { checks_.reset(); }

 private:
  Invoker& inv_;
  std::unique_ptr<BellChecks> checks_;
  std::atomic<uint64_t> sent_{0};
  bool maybe_async_ = false;
  std::vector<Aggregator*> keeping_;
  Messenger& create(Thread dest);
  std::vector<std::unique_ptr<Messenger>> messengers_;  // by global thread id
};

inline void Messenger::count_sent(int64_t d) { owner_->count_sent(d); }

}  // namespace loom::invoke
