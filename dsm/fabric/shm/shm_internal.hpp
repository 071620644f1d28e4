#pragma once
// What the shm provider's files share: endpoint blobs, small helpers, the CQ ring push.
#include <cstdint>
#include <string>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/fabric/shm/shm_layout.hpp"

namespace loom::fabric::shm {

inline constexpr uint32_t kEndpointMagic = 0x4c4d5145;  // "LMQE"
inline constexpr uint32_t kCqSpare = 64;
inline constexpr uint32_t kMaxInline = 256;

struct EndpointBlob {
  uint32_t magic;
  int32_t rank;
  uint32_t qp_num;
  uint32_t pad;
};

inline uint32_t round_pow2(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// True if [addr, addr+len) lies within [base, base+blen), without overflow.
inline bool covers(uint64_t base, uint64_t blen, uint64_t addr, uint64_t len) {
  if (addr < base) return false;
  uint64_t off = addr - base;
  return off <= blen && len <= blen - off;
}

// A mounted hugetlbfs with free 2 MiB pages for at least one chunk, or "".
std::string find_hugetlbfs();

// Pushes one completion into a CQ ring that may belong to another process. Returns false if the
// ring is full (an overrun). `capacity` is the caller's validated copy: the header lives in
// memory another process can write, so its size fields are never used to index.
bool cq_push(CqHeader* h, CqSlot* slots, uint32_t capacity, const Completion& c, uint32_t retire_qp, uint64_t retire_seq);

// Queue pair identities, never reused (thread caches of key views are keyed by them).
uint64_t next_qp_uid();

}  // namespace loom::fabric::shm
