#pragma once
// Structures the shm provider keeps in named shared-memory files, mapped by every process of
// the job. Everything here is read by other processes, so nothing in it is trusted: indices are
// bounds-checked and keys are checked against generations before use.
#include <atomic>
#include <cstdint>

#include "loom/dsm/fabric/fabric.hpp"

namespace loom::fabric::shm {

constexpr uint64_t kKeyMagic = 0x4c4f4f4d4b455931ull;  // "LOOMKEY1"
constexpr uint64_t kCqMagic = 0x4c4f4f4d43513031ull;   // "LOOMCQ01"
constexpr uint64_t kRqMagic = 0x4c4f4f4d52513031ull;   // "LOOMRQ01"
constexpr uint32_t kKeyCapacity = 4096;                 // registrations per process

// A key is (index << 16) | generation; generation 0 never names a live registration.
inline uint32_t key_index(uint32_t key) { return key >> 16; }
inline uint32_t key_generation(uint32_t key) { return key & 0xffffu; }
inline uint32_t make_key(uint32_t index, uint32_t gen) { return (index << 16) | (gen & 0xffffu); }

struct KeyEntry {
  std::atomic<uint32_t> generation;  // 0 = not registered
  std::atomic<uint32_t> access;
  std::atomic<uint64_t> segment;     // segment id inside the owner's job files
  std::atomic<uint64_t> seg_offset;  // where `base` lies inside the segment
  std::atomic<uint64_t> base;        // the owner's virtual address of the registration
  std::atomic<uint64_t> length;
};

// A registration as one process saw it: valid while `entry` still shows the key's generation
// (a generation's fields never change). `mapped` is where `base` lies in the viewing process.
struct KeyView {
  uint32_t key = 0;  // 0: empty
  uint32_t access = 0;
  const KeyEntry* entry = nullptr;
  uint64_t base = 0;
  uint64_t length = 0;
  uint8_t* mapped = nullptr;
};

struct KeyTable {
  uint64_t magic;
  int32_t pid;
  uint32_t capacity;
  std::atomic<uint32_t> alive;  // cleared when the owner closes its provider
  uint32_t pad[3];
  KeyEntry entries[kKeyCapacity];
};

struct alignas(64) CqHeader {
  uint64_t magic;
  uint32_t capacity;  // power of two
  uint32_t mask;
  std::atomic<uint32_t> overrun;
  uint32_t pad;
  alignas(64) std::atomic<uint64_t> head;
  // (claimed count << 1) | awake. The awake bit is seed 004's "sleeping" bit, inverted:
  // a producer's CAS both claims a slot and sets it; seeing it clear means it must wake.
  alignas(64) std::atomic<uint64_t> tail;
};

struct CqSlot {
  std::atomic<uint64_t> seq;
  Completion completion;
  uint32_t retire_qp;   // local send completions: which QP's WQEs this frees
  uint64_t retire_seq;  // ... up to and including this WQE sequence number
};

struct RqEntry {
  uint64_t wr_id;
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct alignas(64) RqHeader {
  uint64_t magic;
  uint32_t capacity;  // power of two
  uint32_t mask;
  uint32_t qp_num;
  uint32_t recv_cq;    // id of the owner's receive CQ file
  int32_t owner_rank;
  uint32_t pad;
  alignas(64) std::atomic<uint64_t> head;  // advanced by the (single) remote sender
  alignas(64) std::atomic<uint64_t> tail;  // advanced by the owner when it posts receives
};

}  // namespace loom::fabric::shm
