#pragma once
// Transmitter: a queue pair shared by many threads, with automatic selective signaling and
// flush numbers (seed 000 §4.1). See docs/selective-signaling.md for the argument in full.
//
//  * Credits: the send queue has `depth` credits. A post takes one before touching the QP and it
//    comes back only when a signaled completion that is provably later in the QP's order is
//    polled, so the send queue can never overflow.
//  * Batches: every post that returned bumps `since_signal`; a signaled post first takes that
//    count (exchange) and carries it in its wr_id, returning exactly those credits when polled.
//    A post counted into a batch returned before that batch's signaled WR was posted, so it is
//    before it in the QP's order and completed when it is.
//  * Flush numbers: signaled posts draw issue numbers; `completed_flush` is the largest issue
//    number seen completed. A post tags its buffer with the issue count read after it returned;
//    any larger issue number was drawn later, so its WR was posted later, so its completion
//    proves the tagged post done: the buffer is reusable once completed_flush() > tag.
//  * Wait-freedom: a thread short of credits polls the shared CQ itself and, if no signaled
//    WR is in flight, makes its own post signaled (from a reserve of credits kept for that).
//    No thread ever waits for another thread to act; it waits only for the fabric.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

#include "dsm/fabric/fabric.hpp"
#include "dsm/memory/circular_allocator.hpp"

namespace loom::signal {

struct Posted {
  fabric::PostResult result = fabric::PostResult::Ok;
  uint64_t tag = 0;  // flush tag: complete once completed_flush() > tag
  bool ok() const { return result == fabric::PostResult::Ok; }
};

class Transmitter : public memory::FlushSource {
 public:
  struct Config {
    uint32_t signal_interval = 0;  // 0: a quarter of the send-queue depth
  };
  // The transmitter owns the QP's send completions: every post on `qp` must go through it, and
  // `send_cq` must serve this QP alone.
  Transmitter(fabric::QueuePair& qp, fabric::CompletionQueue& send_cq, Config cfg);
  Transmitter(fabric::QueuePair& qp, fabric::CompletionQueue& send_cq) : Transmitter(qp, send_cq, Config{}) {}

  // Posts `wr` (its wr_id and signaled fields are set here). Thread-safe, wait-free with respect
  // to other threads. `force_signal` makes this post signaled (for latency-critical waits).
  Posted post(fabric::SendWr wr, bool force_signal = false);

  uint64_t completed_flush() const override { return completed_.load(std::memory_order_acquire); }
  bool complete(uint64_t tag) const { return completed_flush() > tag; }
  // Polls the send CQ once; returns the number of completions handled.
  int progress();
  // Returns once the post tagged `tag` has completed.
  void wait(uint64_t tag);
  // Returns once every post that returned before this call has completed.
  void flush();

  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  fabric::Status last_error() const { return static_cast<fabric::Status>(last_error_.load(std::memory_order_relaxed)); }
  // Called (on the polling thread) for every error completion.
  void set_error_handler(std::function<void(const fabric::Completion&)> h);

  fabric::QueuePair& qp() { return qp_; }
  fabric::CompletionQueue& cq() { return cq_; }
  uint32_t depth() const { return depth_; }
  uint32_t signal_interval() const { return interval_; }
  uint64_t posts() const { return posts_.load(std::memory_order_relaxed); }
  uint64_t signaled_posts() const { return signaled_.load(std::memory_order_relaxed); }
  int64_t credits() const { return credits_.load(std::memory_order_relaxed); }

 private:
  void post_marker();

  fabric::QueuePair& qp_;
  fabric::CompletionQueue& cq_;
  uint32_t depth_;
  uint32_t interval_;
  int64_t reserve_;

  alignas(64) std::atomic<int64_t> credits_;
  alignas(64) std::atomic<uint64_t> since_signal_{0};
  alignas(64) std::atomic<uint64_t> issued_{0};
  alignas(64) std::atomic<uint64_t> completed_{0};
  alignas(64) std::atomic<uint64_t> posts_{0};
  std::atomic<uint64_t> signaled_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint8_t> last_error_{0};
  std::mutex handler_mu_;
  std::function<void(const fabric::Completion&)> on_error_;
};

}  // namespace loom::signal
