#pragma once
// Doorbells (seed 004's "sleeping" bit): a worker thread that has nothing to do sleeps on a word
// of its own in registered memory, saying so in the word; whoever hands it something — a record
// in one of its channels, a result in one of its ReturnSlots, a notification of one of its
// Synchronizers, a barrier message — looks at the word afterwards and wakes it if it sleeps. So
// a waiter is woken by the event it waits for, not found by a timed back-off, and a process
// beside busy ones gets its core back at once (the kernel favours a woken sleeper).
//
// Where the provider maps peers' registered memory (shm) a bell is rung with a load and, when
// the sleeper said so, a futex wake on the shared page. Elsewhere (another node: verbs, or the
// emulated wire) the ringer READs the bell on the queue pair that carried its request and, if
// the thread sleeps, sends it a wake through the service (invoke/bell_checks.hpp); with
// LOOM_INVOKE_REMOTE_BELLS=0, threads whose peers are out of reach keep the timed back-off.
//
// A ring can miss: the ringer's record store may still sit in its store buffer when it reads the
// bell, while the sleeper, having said it sleeps, looks for work and misses the record. The
// sleeper therefore sleeps at most kMaxSleep (1 ms, the timed back-off's longest sleep) per
// round; the miss needs both within a few nanoseconds and was not seen in the measurements
// (bench/README.md, "call_return beside busy processes").
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/dsm/signal/transmitter.hpp"
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
  // Wakes worker thread `t.index` of this process if it sleeps.
  void ring(Thread t) {
    uint32_t* w = bell(t);
    if (w != nullptr && std::atomic_ref<uint32_t>(*w).load(std::memory_order_acquire) == kSleeping) wake(w);
  }
  // Wakes worker thread `t.index` of process `t.rank` if it sleeps, once the request this thread
  // posted to it on `tx` has landed: in place where its bell is mapped, else by a check.
  void ring(Thread t, signal::Transmitter& tx) {
    if (bell(t) != nullptr) return ring(t);
    if (remote_) ring_across(t.rank, t.index, tx);
  }
  // Every worker thread of process `rank` (a result or notification for one of them).
  void ring_process(int rank, signal::Transmitter& tx);
  void ring_process(int rank);  // this process
  // Bells reach this process's peers here (a provider that maps their memory).
  bool reachable(int rank) const { return !peers_[static_cast<size_t>(rank)].empty(); }
  // Whether bells out of reach are rung by checks (LOOM_INVOKE_REMOTE_BELLS).
  bool rings_across() const { return remote_; }

  // For the checks (invoke/bell_checks.hpp): where process `rank`'s bells are, their bytes, and
  // whether a block read from there shows thread `index` asleep.
  using Locator = RemoteMemoryLocator;
  const Locator& remote(int rank) const { return where_[static_cast<size_t>(rank)]; }
  size_t block_bytes() const { return kStride * static_cast<size_t>(threads_); }
  static bool asleep_in(const uint8_t* block, int index) {
    uint32_t w;
    std::memcpy(&w, block + kStride * static_cast<size_t>(index), sizeof w);
    return w == kSleeping;
  }
  // Sends process `rank` a wake for its threads `indices` (a one-way service call).
  void send_wake(int rank, std::span<const uint16_t> indices);
  // The service handler's part: wakes the threads a wake names that sleep. Refuses a malformed
  // message (its length, an index out of range) with an error naming the sender.
  void wake_from_wire(int src_rank, std::span<const std::byte> payload);
  void count_check() { checks_.fetch_add(1, std::memory_order_relaxed); }

  struct Counts {
    uint64_t checks = 0;       // READs of peers' bells this process posted
    uint64_t wakes_sent = 0;   // wakes it sent (a check found a thread asleep)
    uint64_t woken = 0;        // its threads that a wake from another process found asleep and woke
  };
  Counts counts() const {
    return Counts{checks_.load(std::memory_order_relaxed), wakes_sent_.load(std::memory_order_relaxed),
                  woken_.load(std::memory_order_relaxed)};
  }

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
  void ring_across(int rank, int index, signal::Transmitter& tx);

  Invoker& inv_;
  int threads_;
  memory::RDMAMemory mem_;
  std::vector<std::vector<uint32_t*>> peers_;  // by rank, by thread: mapped bells (empty: unreachable)
  std::vector<Locator> where_;                 // by rank: its bells, for checks
  bool remote_ = false;                        // some peer is out of reach, and checks ring it
  uint32_t wake_fn_ = 0;
  std::atomic<uint64_t> checks_{0}, wakes_sent_{0}, woken_{0};
};

}  // namespace loom::invoke
