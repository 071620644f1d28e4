#pragma once
// The program's heap on shared memory: one range at the same address in every process (shared
// in place by the layer), cut into one slice per process: rank 0's is half the range (its master
// runs the program's serial code, where most allocations are made), the others share the other
// half in equal parts. Each process allocates from its own
// slice with bookkeeping of its own, so an allocation never waits for another process; a block
// is read and written by any process like the rest of shared memory. Each block carries a
// 16-byte header in the range (its size and where it starts), so any process can find a
// block's size (realloc) and owner. An allocation of a coherence block or more starts on a block
// boundary and owns its last block whole, so no other allocation shares a block with its data:
// arrays that different processes write in parts do not falsely share their neighbours' blocks
// (at most two blocks of room a large allocation).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "loom/dsm/memory/general_allocator.hpp"

namespace loom::omp {

class SharedHeap {
 public:
  static constexpr size_t kHeader = 16;
  static constexpr size_t kGranule = 64;  // every block starts on a 64-byte boundary

  // [base, base + bytes): zeros, cut into nprocs slices as above; `block` is the range's
  // coherence block (a power of two, at least kGranule).
  SharedHeap(uint8_t* base, size_t bytes, int rank, int nprocs, size_t block);
  SharedHeap(const SharedHeap&) = delete;
  SharedHeap& operator=(const SharedHeap&) = delete;

  bool contains(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return a >= b && a - b < bytes_;
  }
  // n bytes aligned to `align` (a power of two), from this process's slice; nullptr when it is
  // full or n is too large.
  void* allocate(size_t n, size_t align);
  // A block from allocate. One another process allocated is left to it and counted
  // (foreign_frees): its bookkeeping lives in that process. Anything else is an error.
  void free(void* p);
  // The bytes a block holds (what allocate was asked for), read from its header.
  size_t size_of(const void* p) const;
  int owner(const void* p) const;

  size_t slice_bytes() const { return slice_; }  // this process's
  uint64_t foreign_frees() const { return foreign_frees_; }
  uint64_t free_bytes() const;

 private:
  struct Header {
    uint64_t size;    // bytes asked for
    uint32_t offset;  // from the block's start to the pointer handed out
    uint32_t magic;
  };
  static constexpr uint32_t kMagic = 0x4c4f4f4d;  // "LOOM"
  const Header& header_of(const void* p) const;

  uint8_t* base_;
  size_t bytes_;
  size_t first_;  // rank 0's slice
  size_t other_;  // each other rank's
  size_t slice_;  // this process's
  size_t block_;
  int rank_, nprocs_;
  uint8_t* mine_;  // this process's slice
  mutable std::mutex mu_;
  std::unique_ptr<memory::GeneralAllocator> alloc_;
  uint64_t foreign_frees_ = 0;
};

}  // namespace loom::omp
