#pragma once
// Shared regions: ranges of virtual addresses reserved at the same address in every process, so
// a pointer into a region means the same thing everywhere.
//
// Each region is one memory object mapped twice: the application view at the common address,
// whose page protections the protocol sets per block (none / read / read-write), and a runtime
// view that is always writable, through which the protocol fills and reads blocks without ever
// faulting. A fault on the application view is handed to the protocol (FaultSink), which makes
// the block readable or writable and returns; the faulting instruction then runs again.
//
// This layer knows nothing of coherence: the protocol (coherence/) sits behind FaultSink.
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <source_location>
#include <type_traits>
#include <utility>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/memory/general_allocator.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"

namespace loom::region {

enum class Protection : uint8_t { None, Read, ReadWrite };

class Region;

// What a fault was: the hardware says on x86-64 (the page-fault error code); elsewhere it is
// Unknown, and a fault on a block the protocol left readable can only have been a write.
enum class Access : uint8_t { Read, Write, Unknown };

// The protocol's end of the narrow interface. on_fault runs on the faulting thread inside the
// SIGSEGV handler; it must leave the block accessible for the access (write: read-write) or
// throw nothing and abort with a message.
class FaultSink {
 public:
  virtual ~FaultSink() = default;
  virtual void on_fault(Region& r, size_t block, Access access) = 0;
};

struct RegionOptions {
  size_t size = 0;            // rounded up to a whole number of blocks
  size_t block_size = 4096;   // a power of two, at least the page size
  // Bytes of the region set aside for each process's own allocations (allocate_local); the
  // rest is the collective arena. Default (SIZE_MAX): half of the region, split evenly.
  size_t local_bytes = SIZE_MAX;
};

// A range shared in place (AddressSpace::place): whole blocks at the same address everywhere.
struct PlacedOptions {
  void* base = nullptr;
  size_t size = 0;
  size_t block_size = 4096;
  // The range holds zeros in every process (memory just mapped, never written): its contents
  // are neither compared across processes nor copied.
  bool zero = false;
};

class Region {
 public:
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region();

  uint32_t id() const { return id_; }
  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }
  size_t block_size() const { return block_; }
  size_t blocks() const { return size_ / block_; }
  int block_shift() const { return shift_; }
  bool contains(const void* p, size_t n = 1) const {
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return a >= b && n <= size_ && a - b <= size_ - n;
  }
  size_t block_of(const void* p) const {
    return (reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base_)) >> shift_;
  }
  // The always-writable view of block b (never faults).
  uint8_t* runtime_block(size_t b) const { return runtime_ + (b << shift_); }
  uint8_t* app_block(size_t b) const { return base_ + (b << shift_); }
  // The runtime's view of p, an address inside the region: the same memory, never faults.
  const void* runtime_view(const void* p) const { return runtime_ + (static_cast<const uint8_t*>(p) - base_); }
  // Sets the application view's protection of blocks [first, first+count).
  void protect(size_t first, size_t count, Protection p);
  // The protection protect() last set on block b (Read for a block never set: the view is
  // mapped readable). Callers that change a block's protection under a lock of their own read
  // it under the same lock.
  Protection protection(size_t b) const { return protections_[b].load(std::memory_order_relaxed); }

  // The process that manages block b's directory entry (and is its first home): blocks of the
  // collective arena are spread round-robin, blocks of a process's local arena are its own.
  int manager(size_t block) const;

  // ---- allocation inside the region --------------------------------------------------------
  // Collective: every process calls with the same arguments in the same order and gets the
  // same address (a call made by some processes only gives the others different addresses; the
  // checking mode, LOOM_CHECK, makes it an error). Memory starts zeroed. The collective arena is
  // half the region by default (RegionOptions::local_bytes).
  void* allocate(size_t bytes, size_t align = 64, const std::source_location& where = std::source_location::current());
  void deallocate(void* p, const std::source_location& where = std::source_location::current());  // collective
  // This process only, from its local arena (its blocks are managed here).
  void* allocate_local(size_t bytes, size_t align = 64);
  void deallocate_local(void* p);

  // A collective typed array, zero-initialized (T must be valid when all its bytes are zero).
  template <typename T>
  T* new_array(size_t n, const std::source_location& where = std::source_location::current()) {
    static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                  "region arrays hold trivially constructible and destructible types");
    if (n != 0 && sizeof(T) > SIZE_MAX / n) fail("region: array of ", n, " elements overflows");
    return static_cast<T*>(allocate(n * sizeof(T), alignof(T) < 64 ? 64 : alignof(T), where));
  }
  template <typename T>
  void delete_array(T* p, const std::source_location& where = std::source_location::current()) { deallocate(p, where); }
  // new/delete for this process's objects (constructed through the transparent path).
  template <typename T, typename... A>
  T* make_local(A&&... a) {
    void* p = allocate_local(sizeof(T), alignof(T) < 16 ? 16 : alignof(T));
    return ::new (p) T(std::forward<A>(a)...);
  }
  template <typename T>
  void destroy_local(T* p) {
    p->~T();
    deallocate_local(p);
  }

  size_t local_arena_bytes() const { return local_bytes_; }
  // Shared in place (AddressSpace::place): no arenas, every block managed round-robin.
  bool placed() const { return placed_; }
  size_t collective_arena_bytes() const { return collective_bytes_; }

 private:
  friend class AddressSpace;
  Region() = default;
  uint32_t id_ = 0;
  uint8_t* base_ = nullptr;
  uint8_t* runtime_ = nullptr;
  size_t size_ = 0;
  size_t block_ = 0;
  int shift_ = 0;
  int fd_ = -1;
  bool placed_ = false;
  int rank_ = 0;
  int nprocs_ = 1;
  size_t collective_bytes_ = 0;
  size_t local_bytes_ = 0;
  size_t collective_blocks_ = 0;
  size_t local_blocks_ = 0;
  std::mutex alloc_mu_;
  std::unique_ptr<memory::GeneralAllocator> collective_;
  std::unique_ptr<memory::GeneralAllocator> local_;
  std::map<uint64_t, uint64_t> padded_;  // aligned start -> allocated start (collective)
  std::unique_ptr<std::atomic<Protection>[]> protections_;  // per block, as protect() set it
};

// The process's reserve of virtual addresses for regions, at the same address everywhere, and
// the SIGSEGV handler that dispatches faults on region memory. One per process at a time.
class AddressSpace {
 public:
  // Collective. `reserve` bytes of address space (not memory) are set aside.
  AddressSpace(runtime::Bootstrap& boot, size_t reserve, FaultSink& sink);
  ~AddressSpace();
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;

  // Collective: same options in every process (checked). Blocks start readable (zero).
  Region& create(const RegionOptions& opt);
  // Collective: a range this program already has (its data segment, a global array) becomes a
  // region where it is, with its current contents, in every process. The range must be the
  // same, hold the same contents in every process (checked) and not change while this runs; it
  // stays the program's memory after destroy, with the region's last contents in this process.
  Region& place(const PlacedOptions& opt);
  // Collective.
  void destroy(Region& r);
  // The region holding p, or nullptr. Lock-free: the fault handler calls it.
  Region* find(const void* p) const;
  uint8_t* reserve_base() const { return reserve_; }
  size_t reserve_size() const { return reserve_size_; }
  FaultSink& sink() { return sink_; }

  static constexpr int kMaxRegions = 64;

 private:
  Region& install(uint8_t* base, size_t size, size_t block, size_t local, bool placed, bool with_contents = true);
  void release_range(Region& r);
  runtime::Bootstrap& boot_;
  FaultSink& sink_;
  uint8_t* reserve_ = nullptr;
  size_t reserve_size_ = 0;
  mutable std::mutex mu_;
  memory::GeneralAllocator space_;
  uint32_t next_id_ = 1;
  std::atomic<Region*> slots_[kMaxRegions] = {};
};

// Collective: `bytes` of private memory at one address in every process (2 MiB-aligned),
// chosen where all of them are free (common_range.hpp): zeroed and read-write when `accessible`
// (memory to share in place), else inaccessible address space (a reserve). nullptr when there
// is no such range. Unmapped by the caller.
uint8_t* map_at_common_address(runtime::Bootstrap& boot, size_t bytes, bool accessible);

// While an address space exists its SIGSEGV handler stays first: faults on no region go on to
// the handler that was there before it. A program that installs a SIGSEGV handler meanwhile
// (a language runtime's backtrace handler) should replace that one instead: true when there is
// an address space and `act` (unless null) now receives those faults, `old` (unless null) the
// one it replaces; false otherwise (install it the usual way).
bool replace_chained_handler(const struct sigaction* act, struct sigaction* old);

// Set while a thread runs protocol code: a fault on region memory then is a runtime bug and the
// handler says so instead of re-entering the protocol.
struct InRuntime {
  InRuntime();
  ~InRuntime();
  static bool active();
};

}  // namespace loom::region
