#pragma once
// Doorbells (seed 004's "sleeping" bit): a worker thread that has nothing to do sleeps on a word
// of its own in registered memory, saying so in the word; whoever hands it something — a record
// in one of its channels, a result in one of its ReturnSlots, a notification of one of its
// Synchronizers, a barrier message — looks at the word afterwards and wakes it if it sleeps. So
// a waiter is woken by the event it waits for, not found by a timed back-off, and a process
// beside busy ones gets its core back at once (the kernel favours a woken sleeper).
//
// Where the provider maps peers' registered memory (shm) a bell is rung with a load and, when
// the sleeper said so, a futex wake on the shared page. Elsewhere (verbs) bells cannot be
// reached: waits there keep the timed back-off.
//
// A ring can miss: the ringer's record store may still sit in its store buffer when it reads the
// bell, while the sleeper, having said it sleeps, looks for work and misses the record. The
// sleeper therefore sleeps at most kMaxSleep (1 ms, the timed back-off's longest sleep) per
// round; the miss needs both within a few nanoseconds and was not seen in the measurements
// (bench/README.md, "call_return beside busy processes").
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/invoke/config.hpp"

namespace loom::invoke {

class Invoker;

class Doorbells {
 public:
  static constexpr auto kMaxSleep = std::chrono::milliseconds(1);

  // Collective, inside the Invoker's construction (its mesh exists): this process's bells, one
  // cache line per worker thread, and every process's, mapped where the provider can.
  explicit Doorbells(Invoker& inv);
  ~Doorbells();
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;

  // Worker thread `index` of this process, which has nothing to do: says it sleeps, looks once
  // more (`busy()`: work or the awaited condition), and sleeps until rung or kMaxSleep passed.
  template <typename Busy>
  void sleep(int index, Busy&& busy) {
    std::atomic_ref<uint32_t> w(*mine(index));
    w.store(kSleeping, std::memory_order_seq_cst);  // pairs with the ringer's load after its store
    if (!busy()) sleep_on(index);
    w.store(kAwake, std::memory_order_relaxed);
  }
  // Wakes worker thread `t.index` of process `t.rank` if it sleeps (nothing where unreachable).
  void ring(Thread t) {
    uint32_t* w = bell(t);
    if (w != nullptr && std::atomic_ref<uint32_t>(*w).load(std::memory_order_acquire) == kSleeping) wake(w);
  }
  // Every worker thread of process `rank` (a result or notification for one of them).
  void ring_process(int rank);
  // Bells reach this process's peers here (a provider that maps their memory).
  bool reachable(int rank) const { return !peers_[static_cast<size_t>(rank)].empty(); }

 private:
  static constexpr uint32_t kAwake = 0, kSleeping = 1;
  static constexpr size_t kStride = 64;  // a bell per cache line
  uint32_t* mine(int index) const { return reinterpret_cast<uint32_t*>(mem_.bytes() + kStride * static_cast<size_t>(index)); }
  uint32_t* bell(Thread t) const {
    const auto& p = peers_[static_cast<size_t>(t.rank)];
    return p.empty() ? nullptr : p[static_cast<size_t>(t.index)];
  }
  void sleep_on(int index);
  void wake(uint32_t* w);

  Invoker& inv_;
  int threads_;
  memory::RDMAMemory mem_;
  std::vector<std::vector<uint32_t*>> peers_;  // by rank, by thread: mapped bells (empty: unreachable)
};

}  // namespace loom::invoke
