#include "loom/dsm/memory/registered_heap.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::memory {

RegisteredHeap::RegisteredHeap(RDMAAllocator& backing, Fit fit, size_t region_size)
    : backing_(backing), fit_(fit), region_size_(region_size) {}

RegisteredHeap::~RegisteredHeap() {
  for (auto& r : regions_) backing_.free_chunk(r->mem);
}

RDMAMemory RegisteredHeap::allocate(size_t n) {
  if (n == 0) fail("RegisteredHeap: allocation of 0 bytes");
  std::lock_guard<std::mutex> g(mu_);
  for (auto& r : regions_)
    if (auto off = r->space.allocate(n)) return r->mem.slice(*off, *r->space.block_size(*off));
  RDMAMemory chunk = backing_.allocate_chunk(std::max(n, region_size_));
  auto r = std::unique_ptr<Region>(new Region{chunk, GeneralAllocator(chunk.size, fit_)});
  auto off = r->space.allocate(n);
  if (!off) fail("RegisteredHeap: cannot place ", n, " bytes in a fresh region of ", chunk.size);
  RDMAMemory m = r->mem.slice(*off, *r->space.block_size(*off));
  regions_.push_back(std::move(r));
  return m;
}

RegisteredHeap::Region* RegisteredHeap::region_of(const void* addr) const {
  auto* a = static_cast<const uint8_t*>(addr);
  for (auto& r : regions_)
    if (a >= r->mem.bytes() && a < r->mem.bytes() + r->mem.size) return r.get();
  return nullptr;
}

void RegisteredHeap::free(const void* addr) {
  std::lock_guard<std::mutex> g(mu_);
  Region* r = region_of(addr);
  if (r == nullptr) fail("RegisteredHeap: free of ", addr, ", which this heap never allocated");
  r->space.free(static_cast<uint64_t>(static_cast<const uint8_t*>(addr) - r->mem.bytes()));
}

std::optional<RDMAMemory> RegisteredHeap::find(const void* addr) const {
  std::lock_guard<std::mutex> g(mu_);
  Region* r = region_of(addr);
  if (r == nullptr) return std::nullopt;
  uint64_t off = static_cast<uint64_t>(static_cast<const uint8_t*>(addr) - r->mem.bytes());
  auto len = r->space.block_size(off);
  if (!len) return std::nullopt;
  return r->mem.slice(off, *len);
}

size_t RegisteredHeap::live_allocations() const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (auto& r : regions_) n += r->space.allocated_blocks();
  return n;
}

}  // namespace loom::memory
