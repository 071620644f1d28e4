#include "loom/dsm/region/region.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "loom/dsm/region/kernel_work.hpp"
#include "loom/dsm/runtime/runtime.hpp"

namespace loom::region {
namespace {

int prot_of(Protection p) {
  switch (p) {
    case Protection::None: return PROT_NONE;
    case Protection::Read: return PROT_READ;
    case Protection::ReadWrite: return PROT_READ | PROT_WRITE;
  }
  return PROT_NONE;
}

}  // namespace

// ---- Region ----------------------------------------------------------------------------------

Region::~Region() {
  if (runtime_ != nullptr) munmap(runtime_, size_);
  if (fd_ >= 0) close(fd_);
}

void Region::protect(size_t first, size_t count, Protection p) {
  if (first > blocks() || count > blocks() - first) fail("region ", id_, ": blocks ", first, "+", count, " out of range");
  const auto t0 = std::chrono::steady_clock::now();
  if (mprotect(base_ + (first << shift_), count << shift_, prot_of(p)) != 0)
    throw SystemError("region: mprotect", errno);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  count_protect((count << shift_) / 4096, static_cast<uint64_t>(ns));
  for (size_t b = first; b < first + count; ++b) protections_[b].store(p, std::memory_order_relaxed);
}

int Region::manager(size_t block) const {
  if (block < collective_blocks_) return static_cast<int>(block % static_cast<size_t>(nprocs_));
  size_t k = (block - collective_blocks_) / (local_blocks_ == 0 ? 1 : local_blocks_);
  return static_cast<int>(k < static_cast<size_t>(nprocs_) ? k : static_cast<size_t>(nprocs_) - 1);
}

void* Region::allocate(size_t bytes, size_t align, const std::source_location& where) {
  if (Runtime* rt = Runtime::find()) rt->collectives().enter("Region::allocate", where);
  if (bytes == 0) fail("region ", id_, ": allocation of 0 bytes");
  if (placed_) fail("region ", id_, ": a range shared in place has no arena to allocate from");
  if (align == 0 || !std::has_single_bit(align) || align > block_)
    fail("region ", id_, ": alignment ", align, " must be a power of two up to the block size ", block_);
  std::lock_guard<std::mutex> g(alloc_mu_);
  // The allocator hands out 64-byte granules; a larger alignment pads the request and the
  // aligned start maps back to the allocated one for deallocate().
  size_t want = bytes + (align > 64 ? align - 64 : 0);
  auto off = collective_->allocate(want);
  if (!off)
    fail("region ", id_, ": no room for ", bytes, " bytes in the collective arena (",
         collective_->free_bytes(), " of ", collective_bytes_, " bytes free, largest ", collective_->largest_free(),
         "; the collective arena is the region's size less its local arenas, half of it by default: "
         "create_region(size, block_size, local_bytes) sets the local arenas' share)");
  uint64_t aligned = (*off + align - 1) & ~(uint64_t{align} - 1);
  if (aligned != *off) padded_[aligned] = *off;
  return base_ + aligned;
}

void Region::deallocate(void* p, const std::source_location& where) {
  if (Runtime* rt = Runtime::find()) rt->collectives().enter("Region::deallocate", where);
  if (!contains(p) || static_cast<uint8_t*>(p) >= base_ + collective_bytes_)
    fail("region ", id_, ": ", p, " is not in this region's collective arena");
  std::lock_guard<std::mutex> g(alloc_mu_);
  uint64_t off = static_cast<uint64_t>(static_cast<uint8_t*>(p) - base_);
  if (auto it = padded_.find(off); it != padded_.end()) {
    off = it->second;
    padded_.erase(it);
  }
  if (!collective_->block_size(off)) fail("region ", id_, ": free of ", p, ", which is not allocated (freed twice?)");
  collective_->free(off);
}

void* Region::allocate_local(size_t bytes, size_t align) {
  if (bytes == 0) fail("region ", id_, ": allocation of 0 bytes");
  if (placed_) fail("region ", id_, ": a range shared in place has no arena to allocate from");
  if (align == 0 || !std::has_single_bit(align) || align > 64)
    fail("region ", id_, ": local alignment ", align, " must be a power of two up to 64");
  if (local_bytes_ == 0) fail("region ", id_, ": this region has no local arenas (local_bytes = 0)");
  std::lock_guard<std::mutex> g(alloc_mu_);
  auto off = local_->allocate(bytes);
  if (!off) fail("region ", id_, ": no room for ", bytes, " bytes in this process's local arena (", local_->free_bytes(), " free)");
  size_t arena = collective_bytes_ + static_cast<size_t>(rank_) * local_bytes_;
  return base_ + arena + *off;
}

void Region::deallocate_local(void* p) {
  size_t arena = collective_bytes_ + static_cast<size_t>(rank_) * local_bytes_;
  auto* q = static_cast<uint8_t*>(p);
  if (!contains(p) || q < base_ + arena || q >= base_ + arena + local_bytes_)
    fail("region ", id_, ": ", p, " is not in this process's local arena");
  std::lock_guard<std::mutex> g(alloc_mu_);
  uint64_t off = static_cast<uint64_t>(q - (base_ + arena));
  if (!local_->block_size(off)) fail("region ", id_, ": free of ", p, ", which is not allocated (freed twice?)");
  local_->free(off);
}
}  // namespace loom::region
