#pragma once
// The ordered copy of the provider contract (docs/provider-contract.md): bytes in address
// order, the last 8 bytes last, so a trailing notification flag is seen only after the data
// before it. Every WRITE of the shm provider places its bytes with it, and so does any layer that
// copies into mapped memory of another process in the contract's place (the objects' direct
// path), so that a reader polling the flag pairs with the same fence either way.
#include <cstdint>
#include <atomic>
#include <cstring>

#include "loom/dsm/common/backoff.hpp"

namespace loom::fabric {

// Placement of a WRITE in address order, the last 8 bytes last: a trailing notification flag is
// seen only after the data before it (see docs/provider-contract.md).
//
// Up to 64 bytes are copied here with overlapping moves of a fixed width (as a library memcpy
// does inside), without the library call (bench/README.md, "Measurements behind constants in the code").
template <typename T>
[[gnu::always_inline]] inline void move_pair(uint8_t* dst, const uint8_t* src, uint64_t n) {
  // sizeof(T) <= n <= 2 sizeof(T): [0, W) and [n - W, n) cover [0, n).
  constexpr size_t W = sizeof(T);
  T a, b;
  __builtin_memcpy(&a, src, W);
  __builtin_memcpy(&b, src + n - W, W);
  __builtin_memcpy(dst, &a, W);
  __builtin_memcpy(dst + n - W, &b, W);
}
using Bytes16 = uint64_t __attribute__((vector_size(16)));
[[gnu::always_inline]] inline void copy_small(uint8_t* dst, const uint8_t* src, uint64_t n) {  // n <= 64
  if (n >= 32) {
    move_pair<Bytes16>(dst, src, 32);
    move_pair<Bytes16>(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    move_pair<Bytes16>(dst, src, n);
  } else if (n >= 8) {
    move_pair<uint64_t>(dst, src, n);
  } else if (n >= 4) {
    move_pair<uint32_t>(dst, src, n);
  } else if (n >= 2) {
    move_pair<uint16_t>(dst, src, n);
  } else if (n == 1) {
    *dst = *src;
  }
}
[[gnu::always_inline]] inline void place(uint8_t* dst, const uint8_t* src, uint64_t len) {
  if (len == 8) {
    // One 8-byte store: an atomic one where aligned, since the target may poll the word while it
    // lands and two threads of this process may write it in turn (their order set through the
    // target, which a race detector does not see).
    if (reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
      uint64_t v;
      std::memcpy(&v, src, 8);
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(dst)).store(v, std::memory_order_relaxed);
    } else {
      std::memcpy(dst, src, 8);
    }
  } else if (len > 8) {
    if (len <= 72) copy_small(dst, src, len - 8);
    else std::memcpy(dst, src, len - 8);
    wait::store_fence();  // pairs with the reader's load of the flag (acquire) before the data
    std::memcpy(dst + len - 8, src + len - 8, 8);
  } else {
    copy_small(dst, src, len);
  }
}

}  // namespace loom::fabric
