#include "loom/dsm/region/region.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "loom/dsm/common/fault_report.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/region/common_range.hpp"
#include "loom/dsm/runtime/runtime.hpp"

namespace loom::region {
namespace {

std::atomic<AddressSpace*> g_space{nullptr};
struct sigaction g_previous;
thread_local int t_in_runtime = 0;

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

// Collective: every process describes its address space, all compute the same range free in
// each (common_range.hpp) and map it; a range some process could not take after all (a thread
// mapped there meanwhile, or a sanitizer refused it) is excluded and the next one tried.
uint8_t* reserve_in_every_process(runtime::Bootstrap& boot, size_t reserve) {
  constexpr size_t kAlign = size_t{1} << 21;
  constexpr uint64_t kFloor = uint64_t{1} << 32;  // clear of the program and its heap
  std::vector<AddressRange> tried;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::vector<uint64_t> words = encode_layout(read_own_layout(probe_for(reserve), reserve + kAlign));
    auto all = boot.allgather(std::as_bytes(std::span(words)));
    std::vector<MappedLayout> layouts;
    for (size_t r = 0; r < all.size(); ++r) layouts.push_back(decode_layout(all[r], static_cast<int>(r)));
    auto start = highest_common_gap(layouts, tried, reserve, kAlign, kFloor);
    if (!start) return nullptr;  // the same answer in every process
    void* want = reinterpret_cast<void*>(*start);
    void* mine = mmap(want, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (mine != MAP_FAILED && mine != want) {
      munmap(mine, reserve);  // an old kernel that took the address as a hint only
      mine = MAP_FAILED;
    }
    bool all_ok = true;
    for (uint64_t v : boot.allgather_value(uint64_t{mine != MAP_FAILED})) all_ok = all_ok && v == 1;
    if (all_ok) return static_cast<uint8_t*>(mine);
    if (mine != MAP_FAILED) munmap(mine, reserve);
    tried.push_back({*start, *start + reserve});
  }
  return nullptr;
}

void say(const char* s) {
  ssize_t r = ::write(2, s, std::strlen(s));
  (void)r;
}

void say_addr(const char* prefix, const void* a, const char* suffix) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s%p%s", prefix, a, suffix);
  say(buf);
}

Access access_of(void* ctx) {
#if defined(__x86_64__)
  // Page-fault error code: bit 1 is set for writes.
  auto* uc = static_cast<ucontext_t*>(ctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? Access::Write : Access::Read;
#else
  (void)ctx;
  return Access::Unknown;
#endif
}

void on_segv(int sig, siginfo_t* info, void* ctx) {
  int saved = errno;
  AddressSpace* space = g_space.load(std::memory_order_acquire);
  void* addr = info->si_addr;
  Region* r = space ? space->find(addr) : nullptr;
  if (r == nullptr) {
    if (space != nullptr && addr >= space->reserve_base() && addr < space->reserve_base() + space->reserve_size())
      say_addr("loom: access to ", addr, ", inside the shared-region reserve but outside any region\n");
    errno = saved;
    // A fault we do not own goes to whoever handled SIGSEGV before us: the runtime's fault
    // reporter (dsm/common/fault_report.hpp), a sanitizer, or the default action.
    return fault::chain(g_previous, sig, info, ctx);
  }
  if (t_in_runtime != 0) {
    say_addr("loom: the runtime itself faulted on region memory at ", addr,
             " (the protocol must use the runtime view); aborting\n");
    abort();
  }
  size_t b = r->block_of(addr);
  space->sink().on_fault(*r, b, access_of(ctx));
  errno = saved;
}

void install_handler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_previous) != 0) throw SystemError("region: sigaction(SIGSEGV)", errno);
}

void uninstall_handler() { sigaction(SIGSEGV, &g_previous, nullptr); }

int prot_of(Protection p) {
  switch (p) {
    case Protection::None: return PROT_NONE;
    case Protection::Read: return PROT_READ;
    case Protection::ReadWrite: return PROT_READ | PROT_WRITE;
  }
  return PROT_NONE;
}

struct Agreement {
  uint64_t size, block, local, id;
};

}  // namespace

InRuntime::InRuntime() { ++t_in_runtime; }
InRuntime::~InRuntime() { --t_in_runtime; }
bool InRuntime::active() { return t_in_runtime != 0; }

// ---- Region ----------------------------------------------------------------------------------

Region::~Region() {
  if (runtime_ != nullptr) munmap(runtime_, size_);
  if (fd_ >= 0) close(fd_);
}

void Region::protect(size_t first, size_t count, Protection p) {
  if (first > blocks() || count > blocks() - first) fail("region ", id_, ": blocks ", first, "+", count, " out of range");
  if (mprotect(base_ + (first << shift_), count << shift_, prot_of(p)) != 0)
    throw SystemError("region: mprotect", errno);
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

// ---- AddressSpace ----------------------------------------------------------------------------

AddressSpace::AddressSpace(runtime::Bootstrap& boot, size_t reserve, FaultSink& sink)
    : boot_(boot), sink_(sink), space_(reserve == 0 ? 1 : reserve, memory::Fit::First, 1u << 21) {
  if (reserve == 0 || reserve % (size_t{1} << 21) != 0) fail("region: the reserve (", reserve, " bytes) must be a positive multiple of 2 MiB");
  AddressSpace* expected = nullptr;
  if (!g_space.compare_exchange_strong(expected, this)) fail("region: one address space per process at a time");
  reserve_size_ = reserve;
  reserve_ = reserve_in_every_process(boot, reserve);
  if (reserve_ == nullptr) {
    g_space.store(nullptr);
    fail("region: could not reserve ", reserve, " bytes of address space at one address in every process "
         "(set LOOM_DSM_RESERVE lower)");
  }
  install_handler();
}

AddressSpace::~AddressSpace() {
  for (auto& s : slots_) {
    Region* r = s.exchange(nullptr);
    delete r;
  }
  uninstall_handler();
  munmap(reserve_, reserve_size_);
  g_space.store(nullptr, std::memory_order_release);
}

Region& AddressSpace::create(const RegionOptions& opt) {
  const size_t page = page_size();
  if (opt.block_size < page || !std::has_single_bit(opt.block_size) || opt.block_size > (size_t{1} << 20))
    fail("region: block size ", opt.block_size, " must be a power of two from the page size (", page, ") to 1 MiB");
  if (opt.size == 0) fail("region: size 0");
  size_t size = (opt.size + opt.block_size - 1) / opt.block_size * opt.block_size;
  size_t mapped = (size + (size_t{1} << 21) - 1) & ~((size_t{1} << 21) - 1);
  const int n = boot_.size();
  size_t local = opt.local_bytes;
  if (local == SIZE_MAX) local = size / 2 / static_cast<size_t>(n);
  local = local / opt.block_size * opt.block_size;
  if (local > size / static_cast<size_t>(n)) fail("region: local arenas of ", local, " bytes for ", n, " processes exceed the region of ", size);

  // Every process must ask for the same region, or the addresses would differ.
  Agreement mine{size, opt.block_size, local, next_id_};
  auto all = boot_.allgather_value(mine);
  for (int r = 0; r < n; ++r) {
    const Agreement& a = all[static_cast<size_t>(r)];
    if (std::memcmp(&a, &mine, sizeof a) != 0)
      fail("region: rank ", r, " creates a region of ", a.size, " bytes with ", a.block, "-byte blocks (region ", a.id,
           ") while this rank asks for ", size, " bytes, ", opt.block_size, "-byte blocks (region ", mine.id, "): creation is collective");
  }
  std::unique_lock<std::mutex> g(mu_);
  auto off = space_.allocate(mapped);
  if (!off)
    fail("region: ", size, " bytes do not fit the reserve of ", reserve_size_, " bytes (", space_.free_bytes(),
         " free, largest ", space_.largest_free(), "); raise LOOM_DSM_RESERVE");
  int slot = -1;
  for (int i = 0; i < kMaxRegions; ++i)
    if (slots_[i].load() == nullptr) { slot = i; break; }
  if (slot < 0) {
    space_.free(*off);
    fail("region: more than ", kMaxRegions, " regions at once");
  }
  auto r = std::unique_ptr<Region>(new Region());
  r->id_ = next_id_++;
  r->size_ = size;
  r->block_ = opt.block_size;
  r->shift_ = std::countr_zero(opt.block_size);
  r->rank_ = boot_.rank();
  r->nprocs_ = n;
  r->local_bytes_ = local;
  r->collective_bytes_ = size - local * static_cast<size_t>(n);
  r->collective_blocks_ = r->collective_bytes_ / opt.block_size;
  r->local_blocks_ = local / opt.block_size;
  r->collective_ = std::make_unique<memory::GeneralAllocator>(r->collective_bytes_ == 0 ? 64 : r->collective_bytes_, memory::Fit::First, 64);
  if (r->collective_bytes_ == 0) (void)r->collective_->allocate(64);  // nothing to hand out
  r->local_ = std::make_unique<memory::GeneralAllocator>(local == 0 ? 64 : local, memory::Fit::First, 64);
  r->base_ = reserve_ + *off;
  r->protections_ = std::make_unique<std::atomic<Protection>[]>(size / opt.block_size);
  for (size_t b = 0; b < size / opt.block_size; ++b) r->protections_[b].store(Protection::Read, std::memory_order_relaxed);
  r->fd_ = memfd_create("loom-region", MFD_CLOEXEC);
  if (r->fd_ < 0) {
    space_.free(*off);
    throw SystemError("region: memfd_create", errno);
  }
  if (ftruncate(r->fd_, static_cast<off_t>(size)) != 0) {
    space_.free(*off);
    throw SystemError("region: ftruncate", errno);
  }
  void* rt = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd_, 0);
  if (rt == MAP_FAILED) {
    space_.free(*off);
    throw SystemError("region: mmap of the runtime view", errno);
  }
  r->runtime_ = static_cast<uint8_t*>(rt);
  void* app = mmap(r->base_, size, PROT_READ, MAP_SHARED | MAP_FIXED, r->fd_, 0);
  if (app == MAP_FAILED) {
    space_.free(*off);
    throw SystemError("region: mmap of the application view", errno);
  }
  Region& ref = *r;
  slots_[slot].store(r.release(), std::memory_order_release);
  return ref;
}

void AddressSpace::destroy(Region& r) {
  boot_.barrier();
  std::lock_guard<std::mutex> g(mu_);
  for (auto& s : slots_) {
    if (s.load() != &r) continue;
    s.store(nullptr, std::memory_order_release);
    size_t mapped = (r.size_ + (size_t{1} << 21) - 1) & ~((size_t{1} << 21) - 1);
    // Back to reserved, inaccessible address space.
    mmap(r.base_, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    space_.free(static_cast<uint64_t>(r.base_ - reserve_));
    delete &r;
    return;
  }
  fail("region: destroy of a region this address space does not hold");
}

Region* AddressSpace::find(const void* p) const {
  for (const auto& s : slots_) {
    Region* r = s.load(std::memory_order_acquire);
    if (r != nullptr && r->contains(p)) return r;
  }
  return nullptr;
}

}  // namespace loom::region
