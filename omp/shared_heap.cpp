#include "loom/omp/shared_heap.hpp"

#include <algorithm>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::omp {

namespace {
size_t granules(size_t bytes) { return bytes / SharedHeap::kGranule * SharedHeap::kGranule; }
}  // namespace

SharedHeap::SharedHeap(uint8_t* base, size_t bytes, int rank, int nprocs, size_t block)
    : base_(base),
      bytes_(bytes),
      first_(nprocs > 1 ? granules(bytes / 2) : granules(bytes)),
      other_(nprocs > 1 ? granules((bytes - first_) / static_cast<size_t>(nprocs - 1)) : 0),
      slice_(rank == 0 ? first_ : other_),
      block_(block),
      rank_(rank),
      nprocs_(nprocs) {
  if (nprocs < 1 || rank < 0 || rank >= nprocs) fail("omp: heap for rank ", rank, " of ", nprocs);
  if (block < kGranule || (block & (block - 1)) != 0) fail("omp: a heap's coherence block of ", block, " bytes is not a power of two of 64 or more");
  if (reinterpret_cast<uintptr_t>(base) % kGranule != 0 || slice_ < kGranule)
    fail("omp: a heap of ", bytes, " bytes at ", static_cast<void*>(base), " cannot be cut into ", nprocs, " slices");
  mine_ = rank_ == 0 ? base_ : base_ + first_ + other_ * static_cast<size_t>(rank_ - 1);
  alloc_ = std::make_unique<memory::GeneralAllocator>(slice_, memory::Fit::First, kGranule);
}

int SharedHeap::owner(const void* p) const {
  const auto off = static_cast<size_t>(static_cast<const uint8_t*>(p) - base_);
  if (off < first_) return 0;
  return std::min(nprocs_ - 1, 1 + static_cast<int>((off - first_) / other_));
}

void* SharedHeap::allocate(size_t n, size_t align) {
  if (align < 16) align = 16;
  if ((align & (align - 1)) != 0 || align > slice_) return nullptr;
  // A large block's data in blocks of its own: from a block boundary to the end of its last.
  const bool large = n >= block_;
  if (large) align = std::max(align, block_);
  const size_t room = large ? (n + block_ - 1) / block_ * block_ : n;
  if (room < n) return nullptr;
  // Room for the header before the pointer, and for moving the pointer up to `align`.
  const size_t pad = align <= kGranule ? kGranule : align;
  if (room > slice_ - pad) return nullptr;
  std::optional<uint64_t> off;
  {
    std::lock_guard<std::mutex> g(mu_);
    off = alloc_->allocate(room + pad);
  }
  if (!off) return nullptr;
  uint8_t* start = mine_ + *off;
  const auto first = reinterpret_cast<uintptr_t>(start) + kHeader;
  auto* p = reinterpret_cast<uint8_t*>((first + align - 1) / align * align);
  // Written after the lock: the first write to a block of the range may fault into the protocol.
  const Header h{n, static_cast<uint32_t>(p - start), kMagic};
  std::memcpy(p - kHeader, &h, sizeof h);
  return p;
}

const SharedHeap::Header& SharedHeap::header_of(const void* p) const {
  const auto* q = static_cast<const uint8_t*>(p);
  if (!contains(p) || q < base_ + kHeader || reinterpret_cast<uintptr_t>(q) % 16 != 0)
    fail("omp: ", p, " is not a block of the shared heap");
  const auto* h = reinterpret_cast<const Header*>(q - kHeader);
  if (h->magic != kMagic || h->offset < kHeader || h->offset > static_cast<size_t>(q - base_))
    fail("omp: ", p, " is not the start of a shared heap block (freed twice, or its header was overwritten)");
  return *h;
}

size_t SharedHeap::size_of(const void* p) const { return header_of(p).size; }

void SharedHeap::free(void* p) {
  const Header& h = header_of(p);
  auto* start = static_cast<uint8_t*>(p) - h.offset;
  if (owner(start) != rank_) {
    std::lock_guard<std::mutex> g(mu_);
    ++foreign_frees_;
    return;
  }
  const uint64_t off = static_cast<uint64_t>(start - mine_);
  // The magic goes first, so a second free of the block is an error.
  Header dead{};
  std::memcpy(static_cast<uint8_t*>(p) - kHeader, &dead, sizeof dead);
  std::lock_guard<std::mutex> g(mu_);
  alloc_->free(off);
}

uint64_t SharedHeap::free_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  return alloc_->free_bytes();
}

}  // namespace loom::omp
