#pragma once
// Registered memory: one RDMAAllocator per NUMA zone takes superpage-sized chunks from the
// provider, registers each once, and hands out 2 MiB-granular chunks from them (seed 000 §4.2).
// Everything that crosses the fabric comes from here.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/memory/general_allocator.hpp"

namespace loom::memory {

// A registered buffer: where it is and the keys that name it.
struct RDMAMemory {
  void* addr = nullptr;
  size_t size = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  int zone = 0;
  uint8_t* bytes() const { return static_cast<uint8_t*>(addr); }
  uint64_t address() const { return reinterpret_cast<uint64_t>(addr); }
  RDMAMemory slice(size_t offset, size_t len) const { return RDMAMemory{bytes() + offset, len, lkey, rkey, zone}; }
};

constexpr size_t kChunkGranule = 2u << 20;  // 2 MiB

class RDMAAllocator {
 public:
  // superchunk: size of the provider mappings (and registrations) chunks are cut from.
  // numa_node: the operating system's number of the zone's NUMA node, which the provider binds
  // the mappings to (hwloc's os_index; the zone is hwloc's logical index, and the two differ
  // where the system numbers its nodes sparsely or out of order); -1 binds nothing.
  RDMAAllocator(fabric::Provider& provider, int zone, size_t superchunk, int numa_node);
  ~RDMAAllocator();
  RDMAAllocator(const RDMAAllocator&) = delete;
  RDMAAllocator& operator=(const RDMAAllocator&) = delete;

  // A registered chunk of at least `size` bytes (rounded up to 2 MiB). Thread-safe.
  RDMAMemory allocate_chunk(size_t size);
  void free_chunk(const RDMAMemory& m);

  // True if [addr, addr+len) lies inside one registered superchunk of this allocator (a check
  // for addresses that arrive from the wire).
  bool contains(const void* addr, size_t len) const;
  // The registration (whole superchunk: address, size, keys) that holds [addr, addr+len), if
  // one does: what a peer needs to reach an address of this process one-sided.
  std::optional<fabric::MemoryRegion> registration_of(const void* addr, size_t len) const;

  int zone() const { return zone_; }
  int numa_node() const { return numa_node_; }
  fabric::Provider& provider() { return provider_; }
  size_t registrations() const;  // memory registrations made so far (one per superchunk)
  size_t superchunk_size() const { return superchunk_; }
  bool huge_pages() const;

 private:
  struct Super {
    fabric::Chunk chunk;
    fabric::MemoryRegion mr;
    GeneralAllocator space;
  };
  // Commits [off, off+want) of s with the provider and returns it; frees it if that fails.
  RDMAMemory hand_out(Super& s, uint64_t off, size_t want);
  fabric::Provider& provider_;
  int zone_;
  int numa_node_;
  size_t superchunk_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Super>> supers_;
  size_t registrations_ = 0;
  bool huge_ = false;
};

}  // namespace loom::memory
