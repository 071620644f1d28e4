// Regions: creation (the protocol memory beside each region: public copies, directory entries,
// invalidation flags) and destruction, both collective.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

std::unique_ptr<RegionState> Space::Impl::make_region_state(region::Region& r) {
  auto rs = std::make_unique<RegionState>();
  rs->r = &r;
  const size_t nb = r.blocks();
  rs->dir_stride = DirEntry::stride(dir_mode, n);
  rs->pub_off = RegionState::kHeader;
  rs->dir_off = rs->pub_off + r.size();
  rs->flag_off = rs->dir_off + nb * rs->dir_stride;
  const size_t bytes = rs->flag_off + nb;
  rs->mem = rt.allocator().allocate_chunk(bytes);
  std::memset(rs->mem.addr, 0, bytes);
  void* tw = mmap(nullptr, r.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (tw == MAP_FAILED) {
    int err = errno;
    rt.allocator().free_chunk(rs->mem);
    throw SystemError("coherence: mmap of the twin area", err);
  }
  rs->twins = static_cast<uint8_t*>(tw);
  rs->meta = std::unique_ptr<BlockMeta[]>(new BlockMeta[nb]);
  rs->chunk_known.reset(new std::atomic<uint64_t>[(nb + kChunkBlocks - 1) / kChunkBlocks]{});
  return rs;
}

// Every copy starts as the zero version 0 at its manager. The directory policy starts with
// every process a sharer and the copies valid. The timestamp policies start them invalid with
// their data kept (version 0), the application view closed: the first access confirms the copy
// with one directory read (fetch, prefetch). Valid from the start, a region's untouched copies
// were suspects of every acquire whose lease bound passed them, each revalidated again and
// again (a Cached map's inserts spent most of their time there).
void Space::Impl::init_blocks(RegionState& rs, uint64_t t0) {
  for (size_t b = 0; b < rs.r->blocks(); ++b) {
    const int mgr = rs.r->manager(b);
    BlockMeta& m = rs.meta[b];
    m.block = static_cast<uint32_t>(b);
    m.hint_home = mgr;
    m.word0 = DirWord::make(mgr, t0);
    m.rts = dir_mode ? UINT64_MAX : t0;
    if (!dir_mode) m.state = State::Invalid;  // data_wts = hint_wts = 0: the zero version held
    if (mgr != rank) continue;
    uint8_t* e = rs.dir_local(b);
    std::memcpy(e + DirEntry::kWord0, &m.word0.raw, 8);
    if (dir_mode) std::memset(e + DirEntry::kSharers, 1, static_cast<size_t>(n));
  }
  if (!dir_mode) rs.r->protect(0, rs.r->blocks(), region::Protection::None);
}

// Touches every peer's region memory once: a provider may map peer memory on first use (shm
// does), which allocates, and the fault handler must not be the first to get there.
void Space::Impl::touch_peers(RegionState& rs) {
  region::InRuntime ir;
  LaneGuard lane(lanes);
  for (int p = 0; p < n; ++p) lane->post(p, fabric::Opcode::Read, Scratch::kResult, 8, rs.base(p), rs.rkey(p));
  lane->wait();
}

// An acquire that raised this process's acquire time past t0 while the region was being made
// did not see it: its copies are dropped as that acquire would have.
void Space::Impl::expire_since(RegionState& rs, uint64_t t0) {
  std::lock_guard<std::mutex> g(fence.mu);
  if (dir_mode || fence.acq_ts <= t0) return;
  region::InRuntime ir;
  std::optional<LaneGuard> lane;
  for (size_t b = 0; b < rs.r->blocks(); ++b) {
    std::lock_guard<std::mutex> mg(rs.meta[b].mu);
    if (rs.meta[b].rts < fence.acq_ts) drop(lane, rs, rs.meta[b]);
  }
}

void Space::Impl::install(std::unique_ptr<RegionState> rs) {
  size_t slot = 0;
  while (slot < regions.size() && regions[slot].load() != nullptr) ++slot;
  // The AddressSpace holds at most as many regions as there are slots.
  if (slot == regions.size()) fail("coherence: no free region slot");
  rs->slot = static_cast<uint32_t>(slot);
  for (size_t b = 0; b < rs->r->blocks(); ++b) rs->meta[b].region_slot = rs->slot;
  regions[slot].store(rs.release(), std::memory_order_release);
}

void Space::Impl::free_region_state(RegionState* rs) {
  std::unique_lock<std::shared_mutex> no_downgrade_running(exclusive.serve_mu);
  munmap(rs->twins, rs->r->size());
  rt.allocator().free_chunk(rs->mem);
  delete rs;
}

region::Region& Space::create_region(const region::RegionOptions& opt, const std::source_location& where) {
  rt_.collectives().enter("Space::create_region", where);
  return impl_->start_region(impl_->as->create(opt), false);
}

namespace {

region::PlacedOptions placed_options(void* base, size_t size, size_t block_size, bool zero) {
  region::PlacedOptions o;
  o.base = base;
  o.size = size;
  o.block_size = block_size;
  o.zero = zero;
  return o;
}

}  // namespace

region::Region& Space::share_in_place(void* base, size_t size, size_t block_size, const std::source_location& where) {
  rt_.collectives().enter("Space::share_in_place", where);
  return impl_->start_region(impl_->as->place(placed_options(base, size, block_size, false)), true);
}

region::Region& Space::share_fresh_in_place(void* base, size_t size, size_t block_size, const std::source_location& where) {
  rt_.collectives().enter("Space::share_fresh_in_place", where);
  return impl_->start_region(impl_->as->place(placed_options(base, size, block_size, true)), false);
}

// The protocol memory of a new region (made or placed by the AddressSpace): a placed region's
// public copies start with its contents, which every process holds alike.
region::Region& Space::Impl::start_region(region::Region& r, bool with_contents) {
  std::unique_ptr<RegionState> rs;
  try {
    rs = make_region_state(r);
  } catch (...) {
    as->destroy(r);
    throw;
  }
  if (with_contents) std::memcpy(rs->pub_local(0), r.runtime_block(0), r.size());
  uint64_t t0 = 0;
  for (uint64_t t : rt.bootstrap().allgather_value(acq_ts_relaxed())) t0 = std::max(t0, t);
  init_blocks(*rs, t0);
  if (n == 1) make_exclusive_alone(*rs);  // nobody to ask for a downgrade
  rs->remote = rt.bootstrap().allgather_value(locator_of(rs->mem, rank));
  touch_peers(*rs);
  RegionState* raw = rs.get();
  install(std::move(rs));
  expire_since(*raw, t0);
  rt.bootstrap().barrier();  // every directory is initialized before anyone uses it
  return r;
}

void Space::destroy_region(region::Region& r, const std::source_location& where) {
  rt_.collectives().enter("Space::destroy_region", where);
  Impl& I = *impl_;
  RegionState* rs = I.state_of(r);
  if (rs == nullptr) fail("coherence: destroy_region of a region this Space does not hold");
  I.release();
  rt_.bootstrap().barrier();  // nobody reads our public copies any more
  {
    std::lock_guard<std::mutex> g(I.fence.mu);
    std::lock_guard<std::mutex> d(I.dirty.mu);
    for (size_t b = 0; b < r.blocks(); ++b)
      if (rs->meta[b].is_linked()) I.dirty.list.erase(I.dirty.list.iterator_to(rs->meta[b]));
    I.regions[rs->slot].store(nullptr, std::memory_order_release);
  }
  I.free_region_state(rs);
  I.as->destroy(r);
}

}  // namespace loom::coherence
