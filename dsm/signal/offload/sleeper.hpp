#pragma once
// How an offload thread with nothing to do sleeps and is woken (seed 004 compares a futex-like
// wake, its "fork", with a mutex and condition variable). The consumer announces that it
// sleeps, then looks for work once more; a producer publishes its work, then looks for the
// announcement. Both steps are sequentially consistent, so at least one of the two sees the
// other: the consumer finds the work, or the producer wakes it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "loom/dsm/common/futex.hpp"

namespace loom::signal::offload {

enum class Wake : uint8_t { Futex, CondVar };

class Sleeper {
 public:
  explicit Sleeper(Wake how) : how_(how) {}

  // Consumer: sleeps until woken, unless `has_work()` is already true after the announcement.
  template <typename HasWork>
  void sleep(HasWork has_work, std::chrono::nanoseconds timeout) {
    if (how_ == Wake::Futex) {
      sleeping_.store(1, std::memory_order_seq_cst);
      if (!has_work()) {
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        wait::futex_wait(&sleeping_, 1, timeout);
      }
      sleeping_.store(0, std::memory_order_relaxed);
      return;
    }
    std::unique_lock<std::mutex> lk(mu_);
    sleeping_.store(1, std::memory_order_seq_cst);
    if (!has_work()) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      cv_.wait_for(lk, timeout, [&] { return sleeping_.load(std::memory_order_relaxed) == 0; });
    }
    sleeping_.store(0, std::memory_order_relaxed);
  }

  // Producer, after publishing work.
  void wake() {
    if (sleeping_.load(std::memory_order_seq_cst) == 0) return;
    if (how_ == Wake::Futex) {
      if (sleeping_.exchange(0, std::memory_order_seq_cst) == 0) return;
      wakes_.fetch_add(1, std::memory_order_relaxed);
      wait::futex_wake_all(&sleeping_);
      return;
    }
    std::lock_guard<std::mutex> g(mu_);
    if (sleeping_.load(std::memory_order_relaxed) == 0) return;
    sleeping_.store(0, std::memory_order_relaxed);
    wakes_.fetch_add(1, std::memory_order_relaxed);
    cv_.notify_one();
  }

  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  uint64_t wakes() const { return wakes_.load(std::memory_order_relaxed); }

 private:
  const Wake how_;
  alignas(64) std::atomic<uint32_t> sleeping_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> wakes_{0};
};

}  // namespace loom::signal::offload
