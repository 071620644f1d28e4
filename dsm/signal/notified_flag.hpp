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

// Sender side, into a peer's buffer the provider maps here: the payload in 8-byte atomic stores
// (relaxed; the flag's release orders them), then the flag. Atomic because this process's
// threads may write the same mapped buffer one after another — the peer reuses it for the next
// message once it read the last — and the ordering between them runs through the peer's
// process, where a race detector cannot follow it.
inline void store_notified(uint8_t* buffer, size_t capacity, const void* data, size_t len, uint64_t flag) {
  const auto* src = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, src + i, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(buffer + i)).store(w, std::memory_order_relaxed);
  }
  for (; i < len; ++i) std::atomic_ref<uint8_t>(buffer[i]).store(src[i], std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(buffer + NotifiedLayout::flag_offset(capacity)))
      .store(flag, std::memory_order_release);
}

inline bool test_notified(const uint8_t* buffer, size_t capacity, uint64_t expected) {
  auto* flag = reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(buffer) + NotifiedLayout::flag_offset(capacity));
  return std::atomic_ref<uint64_t>(*flag).load(std::memory_order_acquire) == expected;
}

}  // namespace loom::signal
