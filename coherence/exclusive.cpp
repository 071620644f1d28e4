// Exclusive blocks (docs/coherence.md, "Exclusive blocks"): a releaser that publishes a block
// nobody has shared since its last claim marks the directory entry E with itself as owner and
// keeps the block writable in place: no fault, twin, diff or release for it in later intervals.
// Any other process that wants the block (to read it, or to publish its own writes) first asks
// the owner, over a service call, to downgrade it: the owner stops its writers, publishes what
// the block holds as a new version and marks the entry S, which keeps it out of later claims.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "loom/dsm/common/backoff.hpp"

#include "loom/coherence/space_impl.hpp"
#include "loom/dsm/common/stall.hpp"
#include "loom/dsm/common/log.hpp"

namespace loom::coherence {

namespace {
constexpr const char* kDowngrade = "loom.dsm.downgrade";

// Blocks [block, block + count) of a region: the owner downgrades those it holds exclusively.
struct DowngradeRequest {
  uint32_t region = 0;
  uint32_t block = 0;
  uint32_t count = 1;
};
constexpr int kResendMs = 1000;
}  // namespace

// Claims in a region stop paying when too many of them end in a downgrade (each costs a
// service call where a plain release costs a few fabric operations): at most one in four, past
// a first 64, counted over a window that halves every kClaimWindow blocks released in the
// region, so a program whose sharing changes gets them back. Judged per region: one array read
// by others (whose claims end in downgrades) does not stop the claims of another that only its
// writer touches.
bool Space::Impl::claims_pay(const RegionState& rs) const {
  if (cfg.claims != Claims::Adaptive) return cfg.claims == Claims::Always;
  return rs.win_downgrades.load(std::memory_order_relaxed) * 4 <= rs.win_claims.load(std::memory_order_relaxed) + 64;
}

void Space::Impl::age_claim_window(RegionState& rs, size_t released) {
  if (rs.win_released.fetch_add(released, std::memory_order_relaxed) + released < kClaimWindow) return;
  rs.win_released.store(0, std::memory_order_relaxed);
  rs.win_claims.store(rs.win_claims.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
  rs.win_downgrades.store(rs.win_downgrades.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
}

// Makes the blocks claimed so far writable, one mprotect per run of adjacent blocks, then
// exclusive, and lets go of their mutexes (writers that faulted meanwhile find them writable).
// Their unlocking CASes complete first: a downgrade that takes a mutex must find the entry
// holding the claim (an old request, from before an earlier downgrade, may be arriving now).
void Space::Impl::flush_claims(Lane& l) {
  std::vector<Claim>& claims = exclusive.claims;
  if (claims.empty()) return;
  l.wait();
  for (size_t i = 0; i < claims.size();) {
    size_t j = i + 1;
    while (j < claims.size() && claims[j].m->region_slot == claims[i].m->region_slot &&
           claims[j].m->block == claims[j - 1].m->block + 1)
      ++j;
    RegionState* rs = regions[claims[i].m->region_slot].load(std::memory_order_acquire);
    rs->r->protect(claims[i].m->block, j - i, region::Protection::ReadWrite);
    for (size_t k = i; k < j; ++k) claims[k].m->state = State::Exclusive;
    i = j;
  }
  claims.clear();  // unlocks
}

// A process alone: every block is its own from the start, writable, and stays so.
void Space::Impl::make_exclusive_alone(RegionState& rs) {
  for (size_t b = 0; b < rs.r->blocks(); ++b) {
    BlockMeta& m = rs.meta[b];
    m.word0 = m.word0.with_exclusive();  // the owner: the only rank
    m.state = State::Exclusive;
    std::memcpy(rs.dir_local(b) + DirEntry::kWord0, &m.word0.raw, 8);
  }
  rs.r->protect(0, rs.r->blocks(), region::Protection::ReadWrite);
}

// A one-way service call, then the entry is watched until it is no longer the exclusive word
// `seen` (words never repeat): the fault path cannot wait for a reply (a reply needs heap
// memory, and the fault handler never allocates). A request lost to a failed handler is sent
// again every kResendMs. With `run` (an explicit access of blocks up to run->end), one request
// asks the owner for every block it holds exclusively from b on (at most kMaxDowngradeRun): the
// blocks after b that the same owner holds are then only watched, not asked for again.
void Space::Impl::request_downgrade(Lane& l, DirWord seen, RegionState& rs, size_t b, DowngradeRun* run) {
  const int owner = seen.home();
  if (owner == rank || owner >= n)
    fail("coherence: block ", b, " of region ", rs.r->id(), " is held exclusively by rank ", owner, " by its directory entry, "
         "which this process cannot be asked about (corrupt)");
  const bool asked = run != nullptr && run->owner == owner && b >= run->first && b < run->asked_end;
  uint32_t count = 1;
  if (run != nullptr && !asked) {
    count = static_cast<uint32_t>(std::min<size_t>(run->end - b, kMaxDowngradeRun));
    run->owner = owner;
    run->first = b;
    run->asked_end = b + count;
  }
  const DowngradeRequest q{rs.r->id(), static_cast<uint32_t>(b), count};
  const auto payload = std::as_bytes(std::span(&q, 1));
  const int mgr = rs.r->manager(b);
  if (!asked) {
    stats.downgrades_asked.fetch_add(1, std::memory_order_relaxed);
    rt.service().call_without_allocating(owner, exclusive.downgrade_fn, payload);
  }
  wait::Backoff backoff;
  wait::StallWatch stall;
  auto sent = std::chrono::steady_clock::now();
  for (;;) {
    l.post(mgr, fabric::Opcode::Read, Scratch::kResult, 8, rs.dir_addr(mgr, b), rs.rkey(mgr));
    l.wait();
    const DirWord w{l.word(Scratch::kResult)};
    if (w.without_lock() != seen) return;
    if (backoff.should_sleep())
      rt.peers().check(owner, "coherence: block ", b, " of region ", rs.r->id(), " is held exclusively by a rank that cannot give it up");
    backoff.pause();
    stall.check([&] {
      return "coherence: an access to block " + std::to_string(b) + " of region " + std::to_string(rs.r->id()) +
             " waits for rank " + std::to_string(owner) + ", which holds it exclusively, to give it up";
    });
    if (std::chrono::steady_clock::now() - sent > std::chrono::milliseconds(kResendMs)) {
      rt.service().call_without_allocating(owner, exclusive.downgrade_fn, payload);
      sent = std::chrono::steady_clock::now();
    }
  }
}

// The owner's side, on its service thread: publish each block of the request held exclusively
// here as it is, and let it be shared. A block no longer exclusive here is left alone (an
// earlier request did it). Nothing in the request is trusted: region, range and count are checked.
std::vector<std::byte> Space::Impl::serve_downgrade(std::span<const std::byte> payload, int from) {
  DowngradeRequest q;
  if (payload.size() != sizeof q) fail("coherence: downgrade request of ", payload.size(), " bytes from rank ", from);
  std::memcpy(&q, payload.data(), sizeof q);
  std::shared_lock<std::shared_mutex> serving(exclusive.serve_mu);
  RegionState* rs = state_by_id(q.region);
  // A late copy (an asker sends its request again after kResendMs while it waits, and may be
  // done, and the region destroyed, before the copy arrives): nothing of it is left to downgrade.
  if (rs == nullptr) return {};
  if (q.count == 0 || q.count > kMaxDowngradeRun || q.block >= rs->r->blocks() || q.count > rs->r->blocks() - q.block)
    fail("coherence: downgrade request from rank ", from, " names blocks [", q.block, ", +", q.count, ") of ", rs->r->blocks());
  region::InRuntime ir;
  LaneGuard lane(lanes);
  std::vector<std::unique_lock<std::mutex>> run;  // exclusive blocks [first, first + size), held
  size_t first = q.block;
  for (size_t b = q.block; b < size_t{q.block} + q.count; ++b) {
    BlockMeta& m = rs->meta[b];
    // The asked block itself: its mutex as for any downgrade (a claim being flushed holds it).
    // The rest of a range: a racy peek first, since the mutex of a block that is not exclusive
    // here may be held by a thread that waits for another process (an explicit access holds a
    // run of twinned blocks while it fetches the next), which must never wait for this service
    // thread in turn; a block claimed but not yet flushed is asked for again by its own fetch.
    if (b != q.block && m.state != State::Exclusive) continue;
    std::unique_lock<std::mutex> g(m.mu);  // ascending, as every holder of several takes them
    if (m.state != State::Exclusive) continue;
    if (!run.empty() && (first + run.size() != b || run.size() >= kMaxClaimRun)) downgrade_run(*lane, *rs, run, first);
    if (run.empty()) first = b;
    run.push_back(std::move(g));
  }
  downgrade_run(*lane, *rs, run, first);
  return {};
}

// Gives up a run of adjacent exclusive blocks (their mutexes held): one mprotect stops this
// process's writers on all of them (they fault and wait for the mutexes), then each is published
// as a downgrade.
void Space::Impl::downgrade_run(Lane& l, RegionState& rs, std::vector<std::unique_lock<std::mutex>>& run, size_t first) {
  if (run.empty()) return;
  rs.r->protect(first, run.size(), region::Protection::Read);
  for (size_t i = 0; i < run.size(); ++i) {
    release_block(l, rs, rs.meta[first + i], true, Publication::Downgrade);
    l.wait();
    stats.downgrades.fetch_add(1, std::memory_order_relaxed);
    rs.win_downgrades.fetch_add(1, std::memory_order_relaxed);
  }
  run.clear();  // unlocks
}

void Space::Impl::pause_if_injected() const {
  const uint32_t us = exclusive.pause_us.load(std::memory_order_relaxed);
  if (us != 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void Space::fault_inject_downgrade_pause(std::chrono::microseconds pause) {
  if (pause.count() < 0 || pause > std::chrono::seconds(10)) fail("coherence: fault_inject_downgrade_pause of ", pause.count(), " us (0 to 10 s)");
  impl_->exclusive.pause_us.store(static_cast<uint32_t>(pause.count()), std::memory_order_relaxed);
}

void Space::Impl::register_downgrade() {
  exclusive.downgrade_fn = rt.service().register_handler(kDowngrade, [this](const runtime::ServiceRequest& req) {
    return serve_downgrade(req.payload, req.src_rank);
  });
}

void Space::Impl::unregister_downgrade() { rt.service().unregister_handler(exclusive.downgrade_fn); }

}  // namespace loom::coherence
