#pragma once
// Seed 004's tag queue: the signaled requests in flight on one queue pair, in posting order.
// The executor pushes a tag per signaled post; whoever polls the completion queue (the completer,
// or a requester helping in Transmitter::progress, one at a time) pops the tag its completion
// names. Its tail carries the completer's active bit as the command queue's does: the executor
// hands the queue to the completer when it turns the bit from 0 to 1, and the completer stops
// watching only when no tag is in flight.
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "loom/dsm/common/error.hpp"

namespace loom::signal::offload {

struct Tag {
  uint64_t flush_to = 0;  // completed_flush() once the post is done: its ticket + 1
  uint32_t credits = 0;   // send-queue entries the completion frees: the post and the unsignaled ones before it
  // The queue pair refused the post: the tag is done without a completion. Set by the executor
  // after the tag is in the queue (a signaled post's tag goes in before the post, since its
  // completion may be polled before post_send returns); release, paired with the poller's acquire.
  std::atomic<bool> refused{false};
};

class TagQueue {
 public:
  explicit TagQueue(uint32_t capacity) : mask_(capacity - 1), tags_(new Tag[capacity]) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0) fail("offload: a tag queue of ", capacity, " entries (need a power of two)");
  }

  // Executor. Never full: tags are signaled posts in flight, and those hold send-queue credits
  // (capacity >= depth). Returns the tag's sequence number, and whether the completer must be told.
  std::pair<uint64_t, bool> push(uint64_t flush_to, uint32_t credits) {
    uint64_t n = tail_.load(std::memory_order_relaxed) >> 1;
    Tag& t = tags_[n & mask_];
    t.flush_to = flush_to;
    t.credits = credits;
    t.refused.store(false, std::memory_order_relaxed);
    // Release: pairs with front()'s acquire, which then sees the entry.
    uint64_t old = tail_.fetch_add(2, std::memory_order_acq_rel);
    bool activate = (old & 1) == 0 && (tail_.fetch_or(1, std::memory_order_acq_rel) & 1) == 0;
    return {n, activate};
  }
  // Poller (one at a time). The oldest tag in flight, or nullptr.
  Tag* front() {
    uint64_t n = head_.load(std::memory_order_relaxed);
    return n < (tail_.load(std::memory_order_acquire) >> 1) ? &tags_[n & mask_] : nullptr;
  }
  uint64_t head() const { return head_.load(std::memory_order_relaxed); }
  Tag& back() { return tags_[((tail_.load(std::memory_order_relaxed) >> 1) - 1) & mask_]; }  // executor
  uint64_t next_sequence() const { return tail_.load(std::memory_order_relaxed) >> 1; }      // executor
  void pop() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Completer: stops watching if no tag is in flight.
  bool try_deactivate() {
    uint64_t expect = (head_.load(std::memory_order_acquire) << 1) | 1;
    return tail_.compare_exchange_strong(expect, expect & ~uint64_t{1}, std::memory_order_acq_rel);
  }
  uint64_t in_flight() const { return (tail_.load(std::memory_order_acquire) >> 1) - head_.load(std::memory_order_acquire); }
  bool active() const { return (tail_.load(std::memory_order_acquire) & 1) != 0; }

 private:
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) std::atomic<uint64_t> head_{0};
  uint32_t mask_;
  std::unique_ptr<Tag[]> tags_;
};

}  // namespace loom::signal::offload
