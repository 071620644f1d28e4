#pragma once
// Notified flags (seed 002 "NFP"): the sender writes data and a trailing 8-byte flag in one
// RDMA WRITE; the target polls the flag and, once it shows the expected value, the data before
// it is complete. Correct on providers that place a WRITE's bytes in address order with the
// last 8 bytes last (ProviderInfo / docs/provider-contract.md: shm does, as do common HCAs).
#include <atomic>
#include <cstdint>
#include <cstring>

#include "loom/dsm/common/backoff.hpp"

namespace loom::signal {

// Layout of a notified buffer: `capacity` bytes of payload followed by the flag word.
struct NotifiedLayout {
  static constexpr size_t flag_offset(size_t capacity) { return (capacity + 7) & ~size_t{7}; }
  static constexpr size_t bytes(size_t capacity) { return flag_offset(capacity) + 8; }
};

// Sender side: stage payload + flag contiguously so that one WRITE carries both.
inline void stage_notified(uint8_t* staging, size_t capacity, const void* data, size_t len, uint64_t flag) {
  std::memcpy(staging, data, len);
  std::memcpy(staging + NotifiedLayout::flag_offset(capacity), &flag, 8);
}

// Target side: spin, yield, then sleep until the flag equals `expected`.
inline void wait_notified(const uint8_t* buffer, size_t capacity, uint64_t expected) {
  auto* flag = reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(buffer) + NotifiedLayout::flag_offset(capacity));
  std::atomic_ref<uint64_t> f(*flag);
  wait::Backoff b;
  while (f.load(std::memory_order_acquire) != expected) b.pause();
}

inline bool test_notified(const uint8_t* buffer, size_t capacity, uint64_t expected) {
  auto* flag = reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(buffer) + NotifiedLayout::flag_offset(capacity));
  return std::atomic_ref<uint64_t>(*flag).load(std::memory_order_acquire) == expected;
}

}  // namespace loom::signal
