#pragma once
// A thread-safe heap of registered memory with a chosen placement policy; grows by chunks from
// an RDMAAllocator. Serves local allocations and the remote-allocation service.
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "loom/dsm/memory/general_allocator.hpp"
#include "loom/dsm/memory/rdma_allocator.hpp"

namespace loom::memory {

class RegisteredHeap {
 public:
  RegisteredHeap(RDMAAllocator& backing, Fit fit, size_t region_size = 8u << 20);
  ~RegisteredHeap();
  RegisteredHeap(const RegisteredHeap&) = delete;
  RegisteredHeap& operator=(const RegisteredHeap&) = delete;

  RDMAMemory allocate(size_t n);
  // Throws loom::Error if addr is not the start of a live allocation of this heap.
  void free(const void* addr);
  // The allocation starting at addr, if any.
  std::optional<RDMAMemory> find(const void* addr) const;
  size_t live_allocations() const;
  int zone() const { return backing_.zone(); }

 private:
  struct Region {
    RDMAMemory mem;
    GeneralAllocator space;
  };
  Region* region_of(const void* addr) const;

  RDMAAllocator& backing_;
  Fit fit_;
  size_t region_size_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Region>> regions_;
};

}  // namespace loom::memory
