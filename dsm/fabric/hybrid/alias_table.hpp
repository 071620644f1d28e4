#pragma once
// The shm+verbs provider hands out the device's keys (what the NIC checks between hosts); the
// shared-memory path between processes of one host needs the shm provider's key for the same
// registration. Each process publishes the pairs in a file of its job directory (alias.<rank>,
// mapped by the processes of its host): open addressing over kSlots words, each [device key
// (32 bits) | shm key (32 bits)], 0 for an empty slot. A key lives within kProbe slots of its
// home; a lookup reads up to kProbe slots and does not stop at an empty one, so a slot can be
// emptied without moving others. The owner writes (under its own lock); any process reads. What
// a lookup finds is checked again by the shm path (the shm key's generation), so a pair read
// while it changes is an access error, never another registration.
#include <atomic>
#include <cstdint>

namespace loom::fabric::hybrid {

inline constexpr uint64_t kAliasMagic = 0x4c4f4f4d414c5331ull;  // "LOOMALS1"
inline constexpr uint32_t kAliasSlots = 8192;                    // twice the shm provider's keys
inline constexpr uint32_t kProbe = 32;

struct AliasFile {
  uint64_t magic;
  uint32_t slots;
  uint32_t pad;
  std::atomic<uint64_t> slot[kAliasSlots];
};

inline uint32_t alias_home(uint32_t device_key) { return (device_key * 2654435761u) >> (32 - 13); }

// The shm key published for `device_key`, or 0 (not registered; the shm path then fails the
// request with the error the contract names).
inline uint32_t alias_find(const AliasFile* f, uint32_t device_key) {
  if (f == nullptr || device_key == 0) return 0;
  const uint32_t h = alias_home(device_key);
  for (uint32_t i = 0; i < kProbe; ++i) {
    const uint64_t w = f->slot[(h + i) & (kAliasSlots - 1)].load(std::memory_order_acquire);
    if (static_cast<uint32_t>(w >> 32) == device_key) return static_cast<uint32_t>(w);
  }
  return 0;
}

// Owner side (the caller serializes): false if the key's probe range is full.
bool alias_insert(AliasFile* f, uint32_t device_key, uint32_t shm_key);
void alias_erase(AliasFile* f, uint32_t device_key);

}  // namespace loom::fabric::hybrid
