#pragma once
// A list of channels with work for an offload thread: many threads push, one thread pops.
// Push is one exchange and one store (wait-free); a node is in the list at most once, because
// only the thread that turned its queue's active bit from 0 to 1 pushes it (command_queue.hpp).
// The algorithm is D. Vyukov's intrusive multi-producer single-consumer queue.
#include <atomic>

namespace loom::signal::offload {

struct ReadyNode {
  std::atomic<ReadyNode*> next{nullptr};
};

class ReadyList {
 public:
  ReadyList() : head_(&stub_), tail_(&stub_) {}
  ReadyList(const ReadyList&) = delete;
  ReadyList& operator=(const ReadyList&) = delete;

  // Any thread. The exchange is sequentially consistent: it pairs with the consumer's
  // announcement that it sleeps (offloader.cpp, Sleeper), so one of the two sees the other.
  void push(ReadyNode* n) {
    n->next.store(nullptr, std::memory_order_relaxed);
    ReadyNode* prev = head_.exchange(n, std::memory_order_seq_cst);
    // Pairs with pop()'s acquire loads of `next`: the node's owner wrote it before the push.
    prev->next.store(n, std::memory_order_release);
  }

  // The consumer only. nullptr when empty, or while a producer is between its two steps.
  ReadyNode* pop() {
    ReadyNode* tail = tail_;
    ReadyNode* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // a push in progress
    push(&stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next == nullptr) return nullptr;
    tail_ = next;
    return tail;
  }

  // The consumer only: true when nothing was pushed that pop() has not returned. Sequentially
  // consistent, for the sleep protocol.
  bool empty() const {
    ReadyNode* t = tail_;
    return t->next.load(std::memory_order_seq_cst) == nullptr && head_.load(std::memory_order_seq_cst) == t;
  }

 private:
  alignas(64) std::atomic<ReadyNode*> head_;
  alignas(64) ReadyNode* tail_;
  ReadyNode stub_;
};

}  // namespace loom::signal::offload
