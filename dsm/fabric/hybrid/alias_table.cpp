// The owner's side of the alias file: placing and removing pairs.
#include "loom/dsm/fabric/hybrid/alias_table.hpp"

namespace loom::fabric::hybrid {

bool alias_insert(AliasFile* f, uint32_t device_key, uint32_t shm_key) {
  const uint32_t h = alias_home(device_key);
  const uint64_t word = (static_cast<uint64_t>(device_key) << 32) | shm_key;
  int free_at = -1;
  for (uint32_t i = 0; i < kProbe; ++i) {
    auto& s = f->slot[(h + i) & (kAliasSlots - 1)];
    const uint64_t w = s.load(std::memory_order_relaxed);
    if (static_cast<uint32_t>(w >> 32) == device_key) {  // the device reused a key: its new pair
      s.store(word, std::memory_order_release);
      return true;
    }
    if (w == 0 && free_at < 0) free_at = static_cast<int>(i);
  }
  if (free_at < 0) return false;
  f->slot[(h + static_cast<uint32_t>(free_at)) & (kAliasSlots - 1)].store(word, std::memory_order_release);
  return true;
}

void alias_erase(AliasFile* f, uint32_t device_key) {
  const uint32_t h = alias_home(device_key);
  for (uint32_t i = 0; i < kProbe; ++i) {
    auto& s = f->slot[(h + i) & (kAliasSlots - 1)];
    if (static_cast<uint32_t>(s.load(std::memory_order_relaxed) >> 32) == device_key) s.store(0, std::memory_order_release);
  }
}

}  // namespace loom::fabric::hybrid
