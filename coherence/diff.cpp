#include "loom/coherence/diff.hpp"

#include <atomic>
#include <bit>
#include <cstring>

namespace loom::coherence {

namespace {

// A mask with 0xff in every byte where d is non-zero.
inline uint64_t byte_mask(uint64_t d) {
  d |= d >> 4;
  d |= d >> 2;
  d |= d >> 1;
  d &= 0x0101010101010101ull;
  return d * 0xff;
}

}  // namespace

// Word at a time, with a per-byte mask where the private word differs from the twin's.
void merge_diff(uint8_t* master, uint8_t* priv, const uint8_t* twin, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    uint64_t p, t, m;
    std::memcpy(&p, priv + i, 8);
    std::memcpy(&t, twin + i, 8);
    std::memcpy(&m, master + i, 8);
    uint64_t d = p ^ t;
    if (d != 0) {
      uint64_t k = byte_mask(d);
      m = (m & ~k) | (p & k);
      std::memcpy(master + i, &m, 8);
    }
    // Other writers' bytes reach the private copy too, so it ends as the new master. A relaxed
    // word store: other threads of the process may be reading the block word by word.
    if (m != p) std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(priv + i)).store(m, std::memory_order_relaxed);
  }
}

Conflict conflicting_writes(const uint8_t* master, const uint8_t* priv, const uint8_t* twin, size_t n) {
  Conflict c;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t p, t, m;
    std::memcpy(&p, priv + i, 8);
    std::memcpy(&t, twin + i, 8);
    std::memcpy(&m, master + i, 8);
    const uint64_t both = byte_mask(p ^ t) & byte_mask(m ^ t);
    if (both == 0) continue;
    if (c.bytes == 0) c.first = i + static_cast<size_t>(std::countr_zero(both) / 8);
    c.bytes += static_cast<size_t>(std::popcount(both) / 8);
  }
  return c;
}

}  // namespace loom::coherence
