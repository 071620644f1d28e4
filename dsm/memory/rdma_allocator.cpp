#include "loom/dsm/memory/rdma_allocator.hpp"

#include <atomic>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"

namespace loom::memory {

RDMAAllocator::RDMAAllocator(fabric::Provider& provider, int zone, size_t superchunk, int numa_node)
    : provider_(provider), zone_(zone), numa_node_(numa_node), superchunk_(superchunk) {
  if (superchunk < kChunkGranule || superchunk % kChunkGranule != 0)
    fail("RDMAAllocator: superchunk size ", superchunk, " must be a positive multiple of 2 MiB");
}

RDMAAllocator::~RDMAAllocator() {
  for (auto& s : supers_) {
    provider_.deregister(s->mr);
    provider_.unmap_chunk(s->chunk);
  }
}

RDMAMemory RDMAAllocator::allocate_chunk(size_t size) {
  if (size == 0) fail("RDMAAllocator: chunk of 0 bytes");
  size_t want = (size + kChunkGranule - 1) / kChunkGranule * kChunkGranule;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& s : supers_) {
    if (auto off = s->space.allocate(want)) return hand_out(*s, *off, want);
  }
  // A new superchunk, registered once; chunks larger than a superchunk get one of their own.
  size_t bytes = std::max(want, superchunk_);
  auto s = std::unique_ptr<Super>(new Super{provider_.map_chunk(bytes, numa_node_), {}, GeneralAllocator(bytes, Fit::First, kChunkGranule)});
  try {
    s->mr = provider_.register_memory(s->chunk.addr, bytes, fabric::kAllAccess);
  } catch (...) {
    provider_.unmap_chunk(s->chunk);
    throw;
  }
  ++registrations_;
  huge_ = s->chunk.huge_pages;
  if (!s->chunk.huge_pages) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true) && log::host_announcer())
      log::warn("huge pages are not available here; registered memory uses normal pages");
  }
  auto off = s->space.allocate(want);
  supers_.push_back(std::move(s));
  return hand_out(*supers_.back(), *off, want);
}

RDMAMemory RDMAAllocator::hand_out(Super& s, uint64_t off, size_t want) {
  try {
    provider_.commit(s.chunk, off, want);
  } catch (...) {
    s.space.free(off);
    throw;
  }
  return RDMAMemory{static_cast<uint8_t*>(s.chunk.addr) + off, want, s.mr.lkey, s.mr.rkey, zone_};
}

void RDMAAllocator::free_chunk(const RDMAMemory& m) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& s : supers_) {
    auto* base = static_cast<uint8_t*>(s->chunk.addr);
    if (m.bytes() >= base && m.bytes() < base + s->chunk.size) {
      s->space.free(static_cast<uint64_t>(m.bytes() - base));
      return;
    }
  }
  fail("RDMAAllocator::free_chunk: ", m.addr, " is not a chunk of this allocator");
}

size_t RDMAAllocator::registrations() const {
  std::lock_guard<std::mutex> g(mu_);
  return registrations_;
}

bool RDMAAllocator::huge_pages() const {
  std::lock_guard<std::mutex> g(mu_);
  return huge_;
}

bool RDMAAllocator::contains(const void* addr, size_t len) const { return registration_of(addr, len).has_value(); }

std::optional<fabric::MemoryRegion> RDMAAllocator::registration_of(const void* addr, size_t len) const {
  auto a = reinterpret_cast<uintptr_t>(addr);
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& s : supers_) {
    auto base = reinterpret_cast<uintptr_t>(s->chunk.addr);
    if (a >= base && a - base <= s->chunk.size && len <= s->chunk.size - (a - base)) {
      fabric::MemoryRegion mr = s->mr;
      mr.addr = s->chunk.addr;
      mr.size = s->chunk.size;
      return mr;
    }
  }
  return std::nullopt;
}

}  // namespace loom::memory
