// The Space's life: construction (lanes, synchronization memory), teardown, and what it reports.
#include "loom/coherence/space.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/region/kernel_work.hpp"
#include "loom/dsm/runtime/connect.hpp"

namespace loom::coherence {

namespace {
std::atomic<Space*> g_current{nullptr};
constexpr size_t round_up64(size_t x) { return (x + 63) & ~size_t{63}; }
}  // namespace

SyncLayout::SyncLayout(int nprocs, uint32_t sync_objects, size_t notice_bytes) {
  while ((1 << rounds) < nprocs) ++rounds;
  mbox_bytes = round_up64(notice_bytes + 16);  // notices, then the collective call's ticket and the epoch flag
  slot_bytes = round_up64(64 + notice_bytes);  // a lock's tail or a word's value, then notices
  mbox_off = 0;
  slot_off = mbox_off + static_cast<size_t>(std::max(rounds, 1) * 2) * mbox_bytes;
  qnode_off = slot_off + sync_objects * slot_bytes;
  total = qnode_off + static_cast<size_t>(kMaxThreads) * kMaxHeld * 16;
}

Space::Impl::Impl(Runtime& r, Config c)
    : rt(r),
      cfg(c),
      rank(r.rank()),
      n(r.size()),
      lease(c.lease),
      fixed_home(c.policy.home == HomePolicy::Fixed),
      dir_mode(c.policy.invalidation == Invalidation::Directory),
      notices(c.notices) {}

// One lane per worker thread and one spare, each a full set of connected queue pairs.
void Space::Impl::create_lanes() {
  const int nlanes = rt.threads_per_process() + 1;
  for (int i = 0; i < nlanes; ++i) {
    lanes.push_back(std::make_unique<Lane>(rt.provider(), n, rt.allocator().allocate_chunk(Scratch::kBytes)));
    // connect_all pairs the i-th queue pair list of every rank: every rank makes its lanes in
    // the same order.
    runtime::connect_all(rt.bootstrap(), lanes.back()->queue_pairs());
  }
}

void Space::Impl::create_sync_memory() {
  sync.layout = SyncLayout(n, cfg.sync_objects, notice_cap_bytes());
  notices.sent.assign(static_cast<size_t>(sync.layout.rounds), 0);
  sync.mem = rt.allocator().allocate_chunk(sync.layout.total);
  std::memset(sync.mem.addr, 0, sync.mem.size);
  sync.remote = rt.bootstrap().allgather_value(locator_of(sync.mem, rank));
}

RegionState* Space::Impl::state_of(const region::Region& r) {
  for (auto& a : regions) {
    RegionState* rs = a.load(std::memory_order_acquire);
    if (rs != nullptr && rs->r == &r) return rs;
  }
  return nullptr;
}

RegionState* Space::Impl::state_by_id(uint32_t id) {
  for (auto& a : regions) {
    RegionState* rs = a.load(std::memory_order_acquire);
    if (rs != nullptr && rs->r->id() == id) return rs;
  }
  return nullptr;
}

Space::Space(Runtime& rt, Config cfg, const std::source_location& where) : rt_(rt), cfg_(cfg) {
  rt.collectives().enter("Space::Space", where);
  Space* expected = nullptr;
  if (!g_current.compare_exchange_strong(expected, this)) fail("coherence: one Space per process at a time");
  if (cfg.stats) region::watch_running_siblings(true);
  try {
    static_assert(notice_wire_bytes(240) <= Scratch::kMaxNoticeBytes);
    if (cfg.notices > 240) fail("coherence: at most 240 write notices");
    impl_ = std::make_unique<Impl>(rt, cfg);
    Impl& I = *impl_;
    if (I.dir_mode && I.n > Scratch::kMaxSharerBytes)
      fail("coherence: the directory policy supports up to ", Scratch::kMaxSharerBytes, " processes");
    if (I.n > DirWord::kMaxHome + 1) fail("coherence: at most ", DirWord::kMaxHome + 1, " processes");
    I.as = std::make_unique<region::AddressSpace>(rt.bootstrap(), cfg.reserve, *this);
    I.create_lanes();
    I.create_sync_memory();
    I.register_downgrade();
    I.watch_process_barriers();
    signal::Transmitter::prepare_this_thread();  // faults on this thread may send a downgrade request
    rt.bootstrap().barrier();
  } catch (...) {
    if (impl_ && impl_->exclusive.downgrade_fn != 0) impl_->unregister_downgrade();
    if (impl_ && impl_->collectives_observer != 0) rt.collectives().unobserve(impl_->collectives_observer);
    g_current.store(nullptr);
    throw;
  }
}

// Collective: publishes what is dirty, frees every region's protocol memory once nobody reads
// it, and the lanes once every peer's requests on our queue pairs are done.
void Space::Impl::teardown() {
  try {
    rt.collectives().enter("Space::~Space");
    release();
    rt.bootstrap().barrier();
    for (auto& a : regions) {
      RegionState* rs = a.exchange(nullptr);
      if (rs != nullptr) free_region_state(rs);
    }
    rt.bootstrap().barrier();
  } catch (const std::exception& e) {
    log::error("coherence: Space teardown: ", e.what());
  }
  unregister_downgrade();
  rt.collectives().unobserve(collectives_observer);
  for (auto& l : lanes) rt.allocator().free_chunk(l->release_scratch());
  lanes.clear();
  rt.allocator().free_chunk(sync.mem);
  as.reset();
}

void Space::Impl::watch_process_barriers() {
  if (!rt.collectives().checking()) return;
  collectives_observer = rt.collectives().observe([this](const runtime::CollectiveCall& c) {
    if (c.kind != "Runtime::barrier") return;
    size_t written;
    {
      std::lock_guard<std::mutex> g(dirty.mu);
      written = dirty.list.size();
    }
    if (written == 0) return;
    log::warn("coherence: Runtime::barrier() at ", c.where, ": this process wrote ", written,
              " shared-region block(s) since its last release, and Runtime::barrier() does not publish them: "
              "other processes may read older values after it. Space::barrier() publishes them (docs/user-guide.md, "
              "\"Barriers\")");
  });
}

Space::~Space() {
  if (cfg_.stats) std::fprintf(stderr, "loom-coherence: rank %d: %s\n", rt_.rank(), stats_line(stats()).c_str());
  impl_->teardown();
  g_current.store(nullptr);
}

Space& Space::current() {
  Space* s = g_current.load(std::memory_order_acquire);
  if (s == nullptr) fail("coherence: no Space in this process");
  return *s;
}

region::AddressSpace& Space::address_space() { return *impl_->as; }

Stats Counters::snapshot() const {
  Stats s;
  s.faults = faults.load();
  s.read_misses = read_misses.load();
  s.revalidations = revalidations.load();
  s.twins = twins.load();
  s.released_blocks = released_blocks.load();
  s.merged_releases = merged_releases.load();
  s.races = races.load();
  s.fetch_retries = fetch_retries.load();
  s.invalidations = invalidations.load();
  s.fast_reads = fast_reads.load();
  s.exclusive_claims = exclusive_claims.load();
  s.downgrades = downgrades.load();
  s.downgrades_asked = downgrades_asked.load();
  s.notices = notices.load();
  s.bytes_fetched = bytes_fetched.load();
  s.intervals = intervals.load();
  const region::KernelWork k = region::kernel_work();
  s.protect_calls = k.protect_calls;
  s.protect_pages = k.protect_pages;
  s.protect_ns = k.protect_ns;
  s.protect_sampled = k.protect_sampled;
  s.protect_beside_running = k.protect_beside_running;
  s.run_blocks = run_blocks.load();
  s.refreshes = refreshes.load();
  return s;
}

Stats Space::stats() const { return impl_->stats.snapshot(); }

}  // namespace loom::coherence
