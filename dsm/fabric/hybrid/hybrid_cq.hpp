#pragma once
// The shm+verbs provider's completion queue: a shm ring (requests to this host's ranks) and a
// device queue (requests to other hosts') polled as one. A waiter sleeps on the ring's futex;
// the device's completion events reach it through the relay thread, which takes them from the
// completion channels of every such queue (epoll) and interrupts the ring of the queue they
// belong to. Nothing polls on a timer: a completion of either kind wakes the sleeper.
#include <sys/epoll.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "loom/dsm/fabric/shm/shm_cq.hpp"
#include "loom/dsm/fabric/verbs/verbs_cq.hpp"

namespace loom::fabric::hybrid {

class HybridCq;

// One thread per process (started with the first queue): sleeps in epoll_wait on the device
// queues' completion channels.
class EventRelay {
 public:
  EventRelay();
  ~EventRelay();
  void add(HybridCq* cq, int fd);
  // After remove() returns, the relay no longer touches `cq`.
  void remove(HybridCq* cq, int fd);

 private:
  void run();
  int ep_ = -1;
  int stop_ = -1;
  std::mutex mu_;
  std::set<HybridCq*> live_;
  std::thread thread_;
};

class HybridCq : public CompletionQueue {
 public:
  HybridCq(std::unique_ptr<CompletionQueue> shm, std::unique_ptr<CompletionQueue> device, EventRelay& relay, uint32_t depth);
  ~HybridCq() override;

  int poll(std::span<Completion> out) override;
  void wait(std::chrono::nanoseconds timeout) override;
  void interrupt() override { shm_->interrupt(); }
  uint32_t capacity() const override { return depth_; }
  bool overrun() const override { return shm_->overrun() || device_->overrun(); }

  shm::ShmCq& shm() { return *shm_; }
  verbs::VerbsCq& device() { return *device_; }
  // The relay's call: device completions may be waiting.
  void on_device_event();

 private:
  std::unique_ptr<shm::ShmCq> shm_;
  std::unique_ptr<verbs::VerbsCq> device_;
  EventRelay& relay_;
  uint32_t depth_;
  std::atomic<uint32_t> pending_{0};  // set by the relay before it interrupts the ring
  std::atomic<bool> armed_{false};    // an event was asked for and has not come
  std::atomic<uint32_t> turn_{0};     // which half polls first (fairness)
};

}  // namespace loom::fabric::hybrid
