#pragma once
// The one waiting discipline of Loom: spin briefly, then yield, then sleep. Tests run 8
// processes on 2 cores; a waiter that only spins would take the core its producer needs.
//
// Backoff::pause() is for waits that nobody will signal (a flag written by a remote RDMA WRITE):
// it ends in short timed sleeps. Waits that a producer can signal use a futex instead
// (see CompletionQueue::wait and Backoff::should_sleep()).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace loom::wait {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Orders this thread's earlier stores before its later ones as seen by other processes (data
// before the flag or completion that announces it). ThreadSanitizer rejects standalone fences;
// it cannot see other processes anyway, so under it this is a compiler barrier only.
inline void store_fence() {
#if defined(__SANITIZE_THREAD__)
  std::atomic_signal_fence(std::memory_order_release);
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

// Orders this thread's earlier stores before its later loads as seen by other processes (a
// Dekker pair: the other side stores, fences, and loads what this side stored). A compiler
// barrier only under ThreadSanitizer, as store_fence().
inline void full_fence() {
#if defined(__SANITIZE_THREAD__)
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

class Backoff {
 public:
  static constexpr uint32_t kSpins = 64;
  static constexpr uint32_t kYields = 32;
  static constexpr uint32_t kShorterSleeps = 6;  // 20, 40, ..., 640 us

  Backoff() = default;
  // Waits for a peer that is working now (a lock holder inside its critical section) yield for
  // longer before sleeping: a timed sleep would add its whole length to every hand-off.
  explicit Backoff(uint32_t yields) : yields_(yields) {}
  // A waiter that sleeps on a futex its producer wakes spins longer and never yields (a yield
  // beside a busy process hands it the core for a whole time slice).
  Backoff(uint32_t yields, uint32_t spins) : spins_(spins), yields_(yields) {}

  void pause() {
    if (n_ < spins_) {
      cpu_relax();
    } else if (n_ < spins_ + yields_) {
      std::this_thread::yield();
    } else {
      // Timed sleeps grow from 20 us to 1 ms: short enough that a flag written by a peer is
      // seen promptly, long enough that an idle waiter costs nothing.
      uint32_t k = n_ - spins_ - yields_;
      auto us = std::chrono::microseconds(k < kShorterSleeps ? (20u << k) : 1000u);
      std::this_thread::sleep_for(us);
    }
    ++n_;
  }
  // True once spinning and yielding are over: a waiter with a futex should sleep on it now.
  bool should_sleep() const { return n_ >= spins_ + yields_; }
  // True once the timed sleeps have grown to their longest (1 ms): a waiter whose wake-up costs
  // more than the shorter sleeps (one rung across a network) sleeps on its futex from here.
  bool sleeps_longest() const { return n_ >= spins_ + yields_ + kShorterSleeps; }
  void spin_or_yield() {
    if (n_ < spins_) cpu_relax(); else std::this_thread::yield();
    ++n_;
  }
  void reset() { n_ = 0; }

 private:
  uint32_t n_ = 0;
  uint32_t spins_ = kSpins;
  uint32_t yields_ = kYields;
};

}  // namespace loom::wait
