#pragma once
// Futex wait/wake on a 32-bit word that may live in memory shared between processes.
// Shared (non-PRIVATE) futexes are keyed by the backing file page, so a waiter in one process
// is woken by a store-and-wake in another.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace loom::wait {

// Sleeps while *word == expected, at most `timeout`. Spurious returns are allowed.
void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
void futex_wake_all(const std::atomic<uint32_t>* word);

// The low 32 bits of a 64-bit atomic, for futexes on counters (x86-64 and aarch64 are little-endian).
inline const std::atomic<uint32_t>* low_word(const std::atomic<uint64_t>* w) {
  static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4);
  return reinterpret_cast<const std::atomic<uint32_t>*>(w);
}

}  // namespace loom::wait
