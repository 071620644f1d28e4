#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "loom/dsm/common/log.hpp"
#include "loom/dsm/region/common_range.hpp"
#include "loom/dsm/region/fault_handler.hpp"
#include "loom/dsm/region/region.hpp"

namespace loom::region {
namespace {

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Where this process's kernel would put a mapping of `bytes` (0 if it would not).
uint64_t probe_for(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 0;
  munmap(p, bytes);
  return reinterpret_cast<uint64_t>(p);
}

void check_block_size(size_t block) {
  const size_t page = page_size();
  if (block < page || !std::has_single_bit(block) || block > (size_t{1} << 20))
    fail("region: block size ", block, " must be a power of two from the page size (", page, ") to 1 MiB");
}

// What every process must ask for alike, or the addresses would differ (`at`: a placed
// region's address, 0 for one from the reserve).
struct Agreement {
  uint64_t size, block, local, id, at;
};

void agree(runtime::Bootstrap& boot, const Agreement& mine) {
  auto all = boot.allgather_value(mine);
  for (size_t r = 0; r < all.size(); ++r) {
    const Agreement& a = all[r];
    if (std::memcmp(&a, &mine, sizeof a) != 0)
      fail("region: rank ", r, " creates a region of ", a.size, " bytes with ", a.block, "-byte blocks at ",
           reinterpret_cast<void*>(a.at), " (region ", a.id, ") while this rank asks for ", mine.size, " bytes, ",
           mine.block, "-byte blocks at ", reinterpret_cast<void*>(mine.at), " (region ", mine.id, "): creation is collective");
  }
}

// A range shared in place is read whole, between the objects in it too: a sanitizer's red
// zones around globals are not errors here, so these reads are not instrumented (and are
// word by word through a volatile pointer, which the compiler does not turn into memcpy).
__attribute__((no_sanitize("address", "thread"))) uint64_t content_hash(const uint8_t* p, size_t n) {
  const volatile uint64_t* w = reinterpret_cast<const volatile uint64_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n / 8; ++i) h = (h ^ w[i]) * 1099511628211ull;
  return h;
}

__attribute__((no_sanitize("address", "thread"))) void copy_range(uint8_t* dst, const uint8_t* src, size_t n) {
  const volatile uint64_t* from = reinterpret_cast<const volatile uint64_t*>(src);
  auto* to = reinterpret_cast<uint64_t*>(dst);
  for (size_t i = 0; i < n / 8; ++i) to[i] = from[i];
}

}  // namespace

// Every process describes its address space, all compute the same range free in each
// (common_range.hpp) and map it; a range some process could not take after all (a thread mapped
// there meanwhile, or a sanitizer refused it) is excluded and the next one tried.
uint8_t* map_at_common_address(runtime::Bootstrap& boot, size_t bytes, bool accessible) {
  constexpr size_t kAlign = size_t{1} << 21;
  constexpr uint64_t kFloor = uint64_t{1} << 32;  // clear of the program and its heap
  if (bytes == 0) fail("region: a common mapping of 0 bytes");
  const int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  std::vector<AddressRange> tried;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::vector<uint64_t> words = encode_layout(read_own_layout(probe_for(bytes), bytes + kAlign));
    auto all = boot.allgather(std::as_bytes(std::span(words)));
    std::vector<MappedLayout> layouts;
    for (size_t r = 0; r < all.size(); ++r) layouts.push_back(decode_layout(all[r], static_cast<int>(r)));
    auto start = highest_common_gap(layouts, tried, bytes, kAlign, kFloor);
    if (!start) return nullptr;  // the same answer in every process
    void* want = reinterpret_cast<void*>(*start);
    void* mine = mmap(want, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (mine != MAP_FAILED && mine != want) {
      munmap(mine, bytes);  // an old kernel that took the address as a hint only
      mine = MAP_FAILED;
    }
    bool all_ok = true;
    for (uint64_t v : boot.allgather_value(uint64_t{mine != MAP_FAILED})) all_ok = all_ok && v == 1;
    if (all_ok) return static_cast<uint8_t*>(mine);
    if (mine != MAP_FAILED) munmap(mine, bytes);
    tried.push_back({*start, *start + bytes});
  }
  return nullptr;
}

// ---- AddressSpace ----------------------------------------------------------------------------

AddressSpace::AddressSpace(runtime::Bootstrap& boot, size_t reserve, FaultSink& sink)
    : boot_(boot), sink_(sink), space_(reserve == 0 ? 1 : reserve, memory::Fit::First, 1u << 21) {
  if (reserve == 0 || reserve % (size_t{1} << 21) != 0) fail("region: the reserve (", reserve, " bytes) must be a positive multiple of 2 MiB");
  attach_space(this);
  reserve_size_ = reserve;
  reserve_ = map_at_common_address(boot, reserve, false);
  if (reserve_ == nullptr) {
    detach_space();
    fail("region: could not reserve ", reserve, " bytes of address space at one address in every process "
         "(set LOOM_COHERENCE_RESERVE lower)");
  }
}

AddressSpace::~AddressSpace() {
  for (auto& s : slots_) {
    Region* r = s.exchange(nullptr);
    if (r != nullptr) release_range(*r);
    delete r;
  }
  detach_space();
  munmap(reserve_, reserve_size_);
}

Region& AddressSpace::create(const RegionOptions& opt) {
  check_block_size(opt.block_size);
  if (opt.size == 0) fail("region: size 0");
  size_t size = (opt.size + opt.block_size - 1) / opt.block_size * opt.block_size;
  size_t mapped = (size + (size_t{1} << 21) - 1) & ~((size_t{1} << 21) - 1);
  const int n = boot_.size();
  size_t local = opt.local_bytes;
  if (local == SIZE_MAX) local = size / 2 / static_cast<size_t>(n);
  local = local / opt.block_size * opt.block_size;
  if (local > size / static_cast<size_t>(n)) fail("region: local arenas of ", local, " bytes for ", n, " processes exceed the region of ", size);
  agree(boot_, Agreement{size, opt.block_size, local, next_id_, 0});
  std::unique_lock<std::mutex> g(mu_);
  auto off = space_.allocate(mapped);
  if (!off)
    fail("region: ", size, " bytes do not fit the reserve of ", reserve_size_, " bytes (", space_.free_bytes(),
         " free, largest ", space_.largest_free(), "); raise LOOM_COHERENCE_RESERVE");
  try {
    return install(reserve_ + *off, size, opt.block_size, local, false);
  } catch (...) {
    space_.free(*off);
    throw;
  }
}

Region& AddressSpace::place(const PlacedOptions& opt) {
  check_block_size(opt.block_size);
  auto* base = static_cast<uint8_t*>(opt.base);
  const auto at = reinterpret_cast<uintptr_t>(base);
  if (opt.size == 0 || at % opt.block_size != 0 || opt.size % opt.block_size != 0)
    fail("region: a range shared in place (", opt.base, ", ", opt.size, " bytes) must be whole ", opt.block_size, "-byte blocks");
  if (at > UINTPTR_MAX - opt.size) fail("region: the range at ", opt.base, " of ", opt.size, " bytes wraps");
  std::unique_lock<std::mutex> g(mu_);
  for (const auto& s : slots_) {
    const Region* r = s.load();
    if (r != nullptr && base < r->base_ + r->size_ && r->base_ < base + opt.size)
      fail("region: the range at ", opt.base, " of ", opt.size, " bytes overlaps region ", r->id_);
  }
  if (base < reserve_ + reserve_size_ && reserve_ < base + opt.size)
    fail("region: the range at ", opt.base, " overlaps the reserve for regions");
  g.unlock();
  // Every process must share the same range with the same contents, or a pointer into it or a
  // value read from it would mean different things in different processes.
  const uint64_t sum = opt.zero ? 0 : content_hash(base, opt.size);
  agree(boot_, Agreement{opt.size, opt.block_size, 0, next_id_, at});
  const auto sums = boot_.allgather_value(sum);
  for (size_t r = 0; r < sums.size(); ++r)
    if (sums[r] != sum)
      fail("region: the range at ", opt.base, " of ", opt.size, " bytes holds other contents in rank ", r,
           " than in this rank: a range is shared in place before any process changes it");
  g.lock();
  return install(base, opt.size, opt.block_size, 0, true, !opt.zero);
}

void AddressSpace::destroy(Region& r) {
  boot_.barrier();
  std::lock_guard<std::mutex> g(mu_);
  for (auto& s : slots_) {
    if (s.load() != &r) continue;
    s.store(nullptr, std::memory_order_release);
    release_range(r);
    delete &r;
    return;
  }
  fail("region: destroy of a region this address space does not hold");
}

Region* AddressSpace::find(const void* p) const {
  for (const auto& s : slots_) {
    // Pairs with the release that published the region (create: its views mapped and fields
    // set first); the fault handler finds regions here without the lock.
    Region* r = s.load(std::memory_order_acquire);
    if (r != nullptr && r->contains(p)) return r;
  }
  return nullptr;
}

// The region's memory object, its two views and its slot; `mu_` held. A placed region's memory
// object starts with the range's contents, and its application view replaces the range.
Region& AddressSpace::install(uint8_t* base, size_t size, size_t block, size_t local, bool placed, bool with_contents) {
  int slot = -1;
  for (int i = 0; i < kMaxRegions; ++i)
    if (slots_[i].load() == nullptr) { slot = i; break; }
  if (slot < 0) fail("region: more than ", kMaxRegions, " regions at once");
  const int n = boot_.size();
  auto r = std::unique_ptr<Region>(new Region());
  r->id_ = next_id_++;
  r->size_ = size;
  r->block_ = block;
  r->shift_ = std::countr_zero(block);
  r->rank_ = boot_.rank();
  r->nprocs_ = n;
  r->placed_ = placed;
  r->local_bytes_ = local;
  r->collective_bytes_ = placed ? 0 : size - local * static_cast<size_t>(n);
  r->collective_blocks_ = placed ? size / block : r->collective_bytes_ / block;
  r->local_blocks_ = local / block;
  r->collective_ = std::make_unique<memory::GeneralAllocator>(r->collective_bytes_ == 0 ? 64 : r->collective_bytes_, memory::Fit::First, 64);
  if (r->collective_bytes_ == 0) (void)r->collective_->allocate(64);  // nothing to hand out
  r->local_ = std::make_unique<memory::GeneralAllocator>(local == 0 ? 64 : local, memory::Fit::First, 64);
  r->base_ = base;
  r->protections_ = std::make_unique<std::atomic<Protection>[]>(size / block);
  for (size_t b = 0; b < size / block; ++b) r->protections_[b].store(Protection::Read, std::memory_order_relaxed);
  r->fd_ = memfd_create("loom-region", MFD_CLOEXEC);
  if (r->fd_ < 0) throw SystemError("region: memfd_create", errno);
  if (ftruncate(r->fd_, static_cast<off_t>(size)) != 0) throw SystemError("region: ftruncate", errno);
  void* rt = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd_, 0);
  if (rt == MAP_FAILED) throw SystemError("region: mmap of the runtime view", errno);
  r->runtime_ = static_cast<uint8_t*>(rt);
  if (placed && with_contents) copy_range(r->runtime_, base, size);  // sizes are whole blocks
  void* app = mmap(base, size, PROT_READ, MAP_SHARED | MAP_FIXED, r->fd_, 0);
  if (app == MAP_FAILED) throw SystemError("region: mmap of the application view", errno);
  Region& ref = *r;
  slots_[slot].store(r.release(), std::memory_order_release);  // pairs with find()'s acquire
  return ref;
}

// dst[0, n) = src[0, n) where src is the view of memory object fd: the data extents only
// (SEEK_DATA / SEEK_HOLE), the holes left as dst has them (zeros); all of it where the file
// system cannot say.
static void copy_data_extents(uint8_t* dst, const uint8_t* src, int fd, size_t n) {
  off_t at = 0;
  const auto end = static_cast<off_t>(n);
  while (at < end) {
    const off_t data = lseek(fd, at, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) return;  // no data past `at`
      std::memcpy(dst + at, src + at, n - static_cast<size_t>(at));
      return;
    }
    if (data >= end) return;
    off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0 || hole > end) hole = end;
    std::memcpy(dst + data, src + data, static_cast<size_t>(hole - data));
    at = hole;
  }
}

// A reserved region's range goes back to reserved, inaccessible address space; a placed one's
// back to private memory holding the region's last contents in this process's runtime view.
void AddressSpace::release_range(Region& r) {
  if (!r.placed_) {
    size_t mapped = (r.size_ + (size_t{1} << 21) - 1) & ~((size_t{1} << 21) - 1);
    mmap(r.base_, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    space_.free(static_cast<uint64_t>(r.base_ - reserve_));
    return;
  }
  // The copy is made elsewhere and moved over the range in one step, so the range never lacks
  // its contents: a thread may be running on it (the OpenMP layer's master stack). Only the
  // memory object's data is copied: its holes read as zeros, as the fresh copy does.
  void* copy = mmap(nullptr, r.size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* moved = MAP_FAILED;
  if (copy != MAP_FAILED) {
    copy_data_extents(static_cast<uint8_t*>(copy), r.runtime_, r.fd_, r.size_);
    moved = mremap(copy, r.size_, r.size_, MREMAP_MAYMOVE | MREMAP_FIXED, r.base_);
  }
  if (moved != r.base_) {
    log::error("region: could not give the range at ", static_cast<void*>(r.base_), " back to private memory: ", std::strerror(errno));
    std::abort();  // the program's data there is gone
  }
}

}  // namespace loom::region
