// The protocol. docs/coherence.md states it; the comments here say why a step is where it is.
//
// Directory entry of block b, at its manager (dsm/region decides who manages b), registered:
//   word0  [63] W (entry locked by a releaser) [62..48] home rank [47..0] read timestamp (rts)
//   wts    write timestamp of the version in the home's public copy
//   bytes  one sharer byte per process (directory policy only)
// word0 is touched only by fabric atomics (CAS); wts and the sharer bytes by READ/WRITE under W.
// Every release raises rts, so word0 never repeats: a reader that sees the same (home, wts)
// unlocked after reading the data knows no publication overlapped its read.
#include "coherence/space.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <boost/intrusive/list.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <unistd.h>
#include <vector>

#include "coherence/notices.hpp"
#include "dsm/common/env.hpp"
#include "dsm/common/log.hpp"
#include "dsm/runtime/connect.hpp"
#include "dsm/runtime/remote_memory.hpp"
#include "dsm/signal/backoff.hpp"

namespace loom::coherence {

namespace bi = boost::intrusive;

namespace {

constexpr uint64_t kW = uint64_t{1} << 63;
constexpr uint64_t kRtsMask = (uint64_t{1} << 48) - 1;
constexpr int kMaxThreads = 64;
constexpr int kMaxHeld = 16;  // locks one thread may hold (or wait for) at once
constexpr size_t kLaneScratch = 64 * 1024;
constexpr size_t kMaxBlock = size_t{1} << 20;
constexpr size_t kRegionHeader = 4096;
// Yields before a waiter for a lock hand-off or a barrier partner starts timed sleeps.
constexpr uint32_t kHandoffYields = 4096;

inline int w0_home(uint64_t w) { return static_cast<int>((w >> 48) & 0x7fff); }
inline uint64_t w0_rts(uint64_t w) { return w & kRtsMask; }
inline uint64_t make_w0(int home, uint64_t rts) { return (static_cast<uint64_t>(home) << 48) | (rts & kRtsMask); }

std::atomic<Space*> g_current{nullptr};

// Thread slots name a thread's queue-lock nodes; process-wide so they survive Spaces.
std::mutex g_slot_mu;
std::array<bool, kMaxThreads> g_slot_used{};
struct SlotGuard {
  int slot = -1;
  ~SlotGuard() {
    if (slot < 0) return;
    std::lock_guard<std::mutex> g(g_slot_mu);
    g_slot_used[static_cast<size_t>(slot)] = false;
  }
};
thread_local SlotGuard t_slot;
int thread_slot() {
  if (t_slot.slot >= 0) return t_slot.slot;
  std::lock_guard<std::mutex> g(g_slot_mu);
  for (int i = 0; i < kMaxThreads; ++i)
    if (!g_slot_used[static_cast<size_t>(i)]) {
      g_slot_used[static_cast<size_t>(i)] = true;
      t_slot.slot = i;
      return i;
    }
  fail("dsm: more than ", kMaxThreads, " threads use shared regions at once");
}

// Byte-granular merge: bytes where the private copy differs from the twin are this process's
// writes; they go over the master. Word at a time, with a per-byte mask where words differ.
// One pass also brings the private copy up to the merged master.
void merge_diff(uint8_t* master, uint8_t* priv, const uint8_t* twin, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    uint64_t p, t, m;
    std::memcpy(&p, priv + i, 8);
    std::memcpy(&t, twin + i, 8);
    std::memcpy(&m, master + i, 8);
    uint64_t d = p ^ t;
    if (d != 0) {
      uint64_t k = d;
      k |= k >> 4;
      k |= k >> 2;
      k |= k >> 1;
      k &= 0x0101010101010101ull;
      k *= 0xff;
      m = (m & ~k) | (p & k);
      std::memcpy(master + i, &m, 8);
    }
    // Other writers' bytes reach the private copy too, so it ends as the new master.
    if (m != p) std::memcpy(priv + i, &m, 8);
  }
}

}  // namespace

std::string Policy::name() const {
  return std::string(home == HomePolicy::Floating ? "floating" : "fixed") +
         (invalidation == Invalidation::Timestamp ? "-ts" : "-dir");
}

Policy Policy::parse(const std::string& s) {
  for (auto h : {HomePolicy::Floating, HomePolicy::Fixed})
    for (auto i : {Invalidation::Timestamp, Invalidation::Directory}) {
      Policy p{h, i};
      if (p.name() == s) return p;
    }
  fail("dsm: unknown policy '", s, "' (floating-ts, floating-dir, fixed-ts or fixed-dir)");
}

Config Config::from_env() {
  Config c;
  c.policy = Policy::parse(env::get_string("LOOM_DSM_POLICY", "floating-ts"));
  c.reserve = env::get_size("LOOM_DSM_RESERVE", c.reserve);
  int64_t notices = env::get_int("LOOM_DSM_NOTICES", c.notices);
  if (notices < 4 || notices > 240) fail("LOOM_DSM_NOTICES=", notices, ": must be 4..240");
  c.notices = static_cast<uint32_t>(notices);
  int64_t lease = env::get_int("LOOM_DSM_LEASE", static_cast<int64_t>(c.lease));
  if (lease < 1 || lease > (int64_t{1} << 20)) fail("LOOM_DSM_LEASE=", lease, ": must be 1..2^20");
  c.lease = static_cast<uint64_t>(lease);
  int64_t so = env::get_int("LOOM_DSM_SYNC_OBJECTS", c.sync_objects);
  if (so < 1 || so > (1 << 20)) fail("LOOM_DSM_SYNC_OBJECTS=", so, ": must be 1..2^20");
  c.sync_objects = static_cast<uint32_t>(so);
  return c;
}

// ---------------------------------------------------------------------------------------------

enum class State : uint8_t { Invalid, Clean, Dirty };

struct BlockMeta : bi::list_base_hook<> {
  std::mutex mu;
  std::atomic<State> state{State::Clean};  // written under mu; peeked without it
  int hint_home = 0;       // where the newest version we know of is (home or last releaser)
  uint64_t hint_wts = 0;   // ... and its write timestamp
  uint64_t data_wts = 0;   // version of the bytes in the private copy
  uint64_t rts = 0;        // lease: the copy is valid while acq_ts <= rts
  uint64_t known_wts = 0;  // newest notice applied
  uint64_t word0 = 0;      // last word0 seen unlocked (the releaser's CAS guess)
  uint32_t region_slot = 0;
  uint32_t block = 0;
};
using DirtyList = bi::list<BlockMeta>;

inline RemoteMemoryLocator locator_of(const memory::RDMAMemory& m, int rank) {
  return RemoteMemoryLocator{rank, m.zone, m.address(), m.size, m.rkey};
}

struct RegionState {
  region::Region* r = nullptr;
  uint32_t slot = 0;
  memory::RDMAMemory mem;  // [header][public copies][directory][invalidation flags]
  size_t pub_off = 0, dir_off = 0, flag_off = 0, dir_stride = 0;
  std::vector<RemoteMemoryLocator> remote;
  std::unique_ptr<BlockMeta[]> meta;
  uint8_t* twins = nullptr;
  uint64_t inval_seen = 0;
  uint64_t pub_addr(int rank, size_t b) const { return remote[static_cast<size_t>(rank)].addr + pub_off + (b << r->block_shift()); }
  uint64_t dir_addr(int rank, size_t b) const { return remote[static_cast<size_t>(rank)].addr + dir_off + b * dir_stride; }
  uint64_t flag_addr(int rank, size_t b) const { return remote[static_cast<size_t>(rank)].addr + flag_off + b; }
  uint32_t rkey(int rank) const { return remote[static_cast<size_t>(rank)].rkey; }
  uint8_t* pub_local(size_t b) const { return mem.bytes() + pub_off + (b << r->block_shift()); }
  uint8_t* twin(size_t b) const { return twins + (b << r->block_shift()); }
  std::atomic_ref<uint64_t> inval_counter() const { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mem.bytes())); }
};

// A set of queue pairs (one per rank) with one CQ, used by one thread at a time for a
// protocol step: every request is signaled, and the step waits for all of them.
struct Lane {
  std::mutex mu;
  std::unique_ptr<fabric::CompletionQueue> cq;
  std::vector<std::unique_ptr<fabric::QueuePair>> qps;
  memory::RDMAMemory scratch;
  uint32_t outstanding = 0;
  uint64_t next_id = 0;
};

struct Space::Impl {
  Space& s;
  Runtime& rt;
  const Config cfg;
  const int rank, n;
  const uint64_t lease;
  std::unique_ptr<region::AddressSpace> as;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::array<std::atomic<RegionState*>, region::AddressSpace::kMaxRegions> regions{};

  // Synchronization memory: barrier mailboxes, sync-object slots, queue-lock nodes.
  memory::RDMAMemory sync;
  std::vector<RemoteMemoryLocator> sync_remote;
  size_t mbox_bytes = 0, mbox_off = 0, slot_bytes = 0, slot_off = 0, qnode_off = 0;
  int rounds = 0;
  uint32_t next_sync = 0;
  uint64_t barrier_epoch = 0;

  std::mutex fence_mu;  // releases and acquires of this process, one at a time
  std::mutex dirty_mu;
  DirtyList dirty;
  std::mutex notice_mu;
  NoticeBuffer notices;
  uint64_t acq_ts = 0;  // under fence_mu

  // Local part of the barrier.
  std::mutex bar_mu;
  std::condition_variable bar_cv;
  int bar_arrived = 0;
  uint64_t bar_gen = 0;
  std::exception_ptr bar_error;

  std::atomic<uint64_t> st_faults{0}, st_misses{0}, st_reval{0}, st_twins{0}, st_released{0}, st_retries{0}, st_inval{0}, st_fast{0};

  Impl(Space& sp, Runtime& r, Config c)
      : s(sp), rt(r), cfg(c), rank(r.rank()), n(r.size()), lease(c.lease), notices(c.notices) {}

  // ---- lanes -------------------------------------------------------------------------------
  struct LaneGuard {
    Lane* l = nullptr;
    Impl* impl = nullptr;
    explicit LaneGuard(Impl& i) : impl(&i) {
      // A plain thread-local (no destructor to register): the fault handler gets here.
      static std::atomic<uint32_t> next_hint{0};
      thread_local uint32_t hint = next_hint.fetch_add(1, std::memory_order_relaxed);
      Lane& want = *i.lanes[hint % i.lanes.size()];
      if (want.mu.try_lock()) {
        l = &want;
        return;
      }
      for (;;) {
        for (auto& c : i.lanes)
          if (c->mu.try_lock()) {
            l = c.get();
            return;
          }
        std::this_thread::yield();
      }
    }
    ~LaneGuard() {
      if (l->outstanding != 0) {
        try {
          impl->wait(*l);
        } catch (const std::exception& e) {
          log::error("dsm: ", e.what());
        }
      }
      l->mu.unlock();
    }
    Lane& operator*() { return *l; }
  };

  uint8_t* scratch(Lane& l, size_t off) { return l.scratch.bytes() + off; }
  // Scratch layout: [0,256) result words; [4096,8192) notices out; [8192,12288) notices in;
  // [12288,16384) sharer bytes to write; [16384,24576) directory reads (16 + one byte per
  // process); [kLaneScratch, +block) staging for one block.
  static constexpr size_t kRes = 0, kNotOut = 4096, kNotIn = 8192, kShare = 12288, kDir = 16384, kWtsRing = 32768;

  void post(Lane& l, int to, fabric::Opcode op, size_t local_off, uint32_t len, uint64_t raddr, uint32_t rkey,
            uint64_t cmp = 0, uint64_t swp = 0) {
    post_mem(l, to, op, l.scratch, local_off, len, raddr, rkey, cmp, swp);
  }
  // Every request is signaled; a full lane is drained first. Local buffers are the lane's
  // scratch (post) or other registered memory of this process (its public copies).
  void post_mem(Lane& l, int to, fabric::Opcode op, const memory::RDMAMemory& m, size_t off, uint32_t len,
                uint64_t raddr, uint32_t rkey, uint64_t cmp = 0, uint64_t swp = 0) {
    if (to < 0 || to >= n) fail("dsm: request to rank ", to, " of ", n);
    if (l.outstanding + 1 >= l.qps[0]->caps().max_send_wr) wait(l);
    fabric::SendWr wr;
    wr.wr_id = ++l.next_id;
    wr.opcode = op;
    wr.signaled = true;
    wr.local = fabric::Sge{m.address() + off, len, m.lkey};
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    wr.compare_add = cmp;
    wr.swap = swp;
    signal::Backoff b;
    for (;;) {
      fabric::PostResult r = l.qps[static_cast<size_t>(to)]->post_send(wr);
      if (r == fabric::PostResult::Ok) break;
      if (r != fabric::PostResult::QueueFull) fail("dsm: posting ", fabric::to_string(op), " to rank ", to, ": ", fabric::to_string(r));
      wait(l);
      b.pause();
    }
    ++l.outstanding;
  }
  void wait(Lane& l) {
    std::array<fabric::Completion, 16> cs;
    signal::Backoff b;
    std::string err;
    while (l.outstanding != 0) {
      int k = l.cq->poll(cs);
      for (int i = 0; i < k; ++i) {
        --l.outstanding;
        if (cs[static_cast<size_t>(i)].status != fabric::Status::Success && err.empty()) {
          const auto& c = cs[static_cast<size_t>(i)];
          err = detail::concat(fabric::to_string(c.opcode), " failed: ", fabric::to_string(c.status));
        }
      }
      if (k == 0) {
        if (b.should_sleep()) l.cq->wait(std::chrono::milliseconds(1));
        else b.spin_or_yield();
      }
    }
    if (!err.empty()) {
      // A queue pair in error stays there until reset; reset every one so the next step can run.
      for (auto& q : l.qps)
        if (q->state() == fabric::QpState::Error) q->reset();
      fail("dsm: ", err, " (is a peer gone?)");
    }
  }
  uint64_t res(Lane& l, int i) { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(scratch(l, kRes + 8 * static_cast<size_t>(i)))).load(std::memory_order_acquire); }
  void set_res(Lane& l, int i, uint64_t v) { std::memcpy(scratch(l, kRes + 8 * static_cast<size_t>(i)), &v, 8); }

  // A fabric CAS; returns the old value.
  uint64_t cas(Lane& l, int to, uint64_t addr, uint32_t rkey, uint64_t expected, uint64_t desired) {
    post(l, to, fabric::Opcode::CompareSwap, kRes, 8, addr, rkey, expected, desired);
    wait(l);
    return res(l, 0);
  }

  RegionState* state_of(const region::Region& r) {
    for (auto& a : regions) {
      RegionState* rs = a.load(std::memory_order_acquire);
      if (rs != nullptr && rs->r == &r) return rs;
    }
    return nullptr;
  }
  RegionState* state_by_id(uint32_t id) {
    for (auto& a : regions) {
      RegionState* rs = a.load(std::memory_order_acquire);
      if (rs != nullptr && rs->r->id() == id) return rs;
    }
    return nullptr;
  }

  // ---- block operations (the caller holds a lane, then the block's mutex) ------------------

  struct DirView {
    uint64_t word0, wts;
    const uint8_t* sharers;
  };
  DirView dir_view(Lane& l) {
    const uint8_t* p = scratch(l, kDir);
    DirView d;
    d.word0 = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(p))).load(std::memory_order_acquire);
    std::memcpy(&d.wts, p + 8, 8);
    d.sharers = p + 16;
    return d;
  }
  void check_dir(const DirView& d, const RegionState& rs, size_t b) {
    if (w0_home(d.word0) >= n) fail("dsm: directory entry of block ", b, " of region ", rs.r->id(), " names home ", w0_home(d.word0), " of ", n, " ranks (corrupt)");
  }

  // Makes an invalid block's private copy current (Clean), or confirms the data it holds.
  void fetch(Lane& l, RegionState& rs, BlockMeta& m) {
    const size_t b = m.block;
    const int mgr = rs.r->manager(b);
    const size_t bs = rs.r->block_size();
    const bool dir_mode = cfg.policy.invalidation == Invalidation::Directory;
    const uint32_t dir_len = static_cast<uint32_t>(16 + (dir_mode ? static_cast<size_t>(n) : 0));
    int home = cfg.policy.home == HomePolicy::Fixed ? mgr : m.hint_home;
    uint64_t wts = m.hint_wts;
    bool fast = m.hint_home != w0_home(m.word0);
    signal::Backoff backoff;
    // The private copy still holds version data_wts: if that is the newest we know of, one
    // directory read may confirm it (an expired lease, or an invalidation that changed nothing).
    bool have_data = m.data_wts == wts;
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) st_retries.fetch_add(1, std::memory_order_relaxed);
      if (dir_mode) {
        // Join the sharers before validating: a releaser that locks the entry after our
        // validation read sees us and invalidates our copy.
        scratch(l, kRes + 64)[0] = 1;
        post(l, mgr, fabric::Opcode::Write, kRes + 64, 1, rs.dir_addr(mgr, b) + 16 + static_cast<size_t>(rank), rs.rkey(mgr));
      }
      if (!have_data) {
        post(l, home, fabric::Opcode::Read, kLaneScratch, static_cast<uint32_t>(bs), rs.pub_addr(home, b), rs.rkey(home));
        // Same queue pair: the directory read executes after the data read.
        if (home != mgr) wait(l);
      }
      post(l, mgr, fabric::Opcode::Read, kDir, dir_len, rs.dir_addr(mgr, b), rs.rkey(mgr));
      wait(l);
      DirView d = dir_view(l);
      check_dir(d, rs, b);
      int dhome = w0_home(d.word0);
      if ((d.word0 & kW) || dhome != home || d.wts != wts) {
        // Moved on since the version we aimed at, or being published now: aim at what the
        // entry says (a state it really had) and read again.
        home = cfg.policy.home == HomePolicy::Fixed ? mgr : dhome;
        wts = d.wts;
        have_data = false;
        if (d.word0 & kW) backoff.pause();
        continue;
      }
      uint64_t rts = w0_rts(d.word0);
      if (!dir_mode) {
        // Logical lease: the copy must stay valid at least until our acquire time plus a lease.
        uint64_t want = std::max(wts, acq_ts_relaxed()) + lease;
        if (rts < want - lease / 2) {
          uint64_t nw = make_w0(dhome, want);
          uint64_t old = cas(l, mgr, rs.dir_addr(mgr, b), rs.rkey(mgr), d.word0, nw);
          if (old != d.word0) continue;  // raced: validate again (the data may still be good)
          rts = want;
          d.word0 = nw;
        }
      } else {
        rts = UINT64_MAX;
      }
      if (have_data) {
        st_reval.fetch_add(1, std::memory_order_relaxed);
      } else {
        std::memcpy(rs.r->runtime_block(b), scratch(l, kLaneScratch), bs);
        st_misses.fetch_add(1, std::memory_order_relaxed);
        if (fast && attempt == 0) st_fast.fetch_add(1, std::memory_order_relaxed);
      }
      m.data_wts = wts;
      m.hint_home = dhome;
      m.hint_wts = wts;
      m.rts = rts;
      m.word0 = d.word0;
      m.state = State::Clean;
      rs.r->protect(b, 1, region::Protection::Read);
      return;
    }
  }

  uint64_t acq_ts_relaxed() { return std::atomic_ref<uint64_t>(acq_ts).load(std::memory_order_relaxed); }

  void make_dirty(RegionState& rs, BlockMeta& m) {
    const size_t b = m.block;
    std::memcpy(rs.twin(b), rs.r->runtime_block(b), rs.r->block_size());
    m.state = State::Dirty;
    {
      std::lock_guard<std::mutex> g(dirty_mu);
      dirty.push_back(m);
    }
    rs.r->protect(b, 1, region::Protection::ReadWrite);
    st_twins.fetch_add(1, std::memory_order_relaxed);
  }

  // Publishes this process's writes to a dirty block (floating home: becomes its home).
  void release_block(Lane& l, RegionState& rs, BlockMeta& m, bool protected_already = false) {
    const size_t b = m.block;
    const int mgr = rs.r->manager(b);
    const size_t bs = rs.r->block_size();
    const bool fixed = cfg.policy.home == HomePolicy::Fixed;
    const bool dir_mode = cfg.policy.invalidation == Invalidation::Directory;
    const uint32_t dir_len = static_cast<uint32_t>(16 + (dir_mode ? static_cast<size_t>(n) : 0));
    {
      std::lock_guard<std::mutex> g(dirty_mu);
      if (m.is_linked()) dirty.erase(dirty.iterator_to(m));
    }
    // Writers of this process fault (and wait for the block's mutex) from here on.
    if (!protected_already) rs.r->protect(b, 1, region::Protection::Read);

    // 1. Lock the directory entry: one CAS when our last view of it is still right.
    uint64_t guess = m.word0 & ~kW;
    signal::Backoff backoff;
    uint64_t old;
    bool unchanged = true;
    for (;;) {
      old = cas(l, mgr, rs.dir_addr(mgr, b), rs.rkey(mgr), guess, guess | kW);
      if (old == guess) break;
      unchanged = false;
      if (old & kW) backoff.pause();
      guess = old & ~kW;
    }
    const int home = fixed ? mgr : w0_home(old);
    if (home >= n) fail("dsm: directory entry of block ", b, " names home ", home, " (corrupt)");
    uint8_t* priv = rs.r->runtime_block(b);
    // The entry is as it was when our copy was taken (every release changes word0): nobody
    // published since, so the master is our twin and the new master is our private copy.
    // Migratory and single-writer blocks take this path: no transfer, no diff.
    uint8_t* master;
    uint8_t* local_master = fixed ? (mgr == rank ? rs.pub_local(b) : scratch(l, kLaneScratch)) : rs.pub_local(b);
    if (unchanged) {
      master = local_master;
      std::memcpy(master, priv, bs);
      if (dir_mode) {
        post(l, mgr, fabric::Opcode::Read, kDir, dir_len, rs.dir_addr(mgr, b), rs.rkey(mgr));
        wait(l);
      }
    } else {
      // 2. The current master (one coarse READ) and the entry (sharers).
      master = local_master;
      if (fixed) {
        if (mgr != rank) post(l, mgr, fabric::Opcode::Read, kLaneScratch, static_cast<uint32_t>(bs), rs.pub_addr(mgr, b), rs.rkey(mgr));
      } else if (home != rank) {
        // Our own public copy becomes the new master; nobody reads it now (the entry is locked).
        post_mem(l, home, fabric::Opcode::Read, rs.mem, rs.pub_off + (b << rs.r->block_shift()), static_cast<uint32_t>(bs),
                 rs.pub_addr(home, b), rs.rkey(home));
      }
      if (dir_mode) post(l, mgr, fabric::Opcode::Read, kDir, dir_len, rs.dir_addr(mgr, b), rs.rkey(mgr));
      wait(l);
      // 3. Our diff over the master, locally; the private copy takes the others' changes in
      //    the same pass.
      merge_diff(master, priv, rs.twin(b), bs);
    }
    DirView d = dir_view(l);

    // 4. Timestamps: the new version is logically after every lease handed out on the old one
    //    (rts >= wts always, so rts + 1 is past the old version too).
    uint64_t wts_new = std::max(w0_rts(old) + 1, acq_ts_relaxed());
    if (wts_new > kRtsMask - (uint64_t{1} << 21)) fail("dsm: write timestamps of block ", b, " exhausted");
    uint64_t rts_new = dir_mode ? wts_new : wts_new + lease;
    const int home_new = fixed ? mgr : rank;

    // 5. Directory policy: invalidate every other sharer (a flag and a counter at each).
    if (dir_mode) {
      uint8_t* sh = scratch(l, kShare);
      std::memcpy(sh, d.sharers, static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) {
        if (p == rank || sh[p] == 0) continue;
        scratch(l, kRes + 64)[0] = 1;
        post(l, p, fabric::Opcode::Write, kRes + 64, 1, rs.flag_addr(p, b), rs.rkey(p));
        post(l, p, fabric::Opcode::FetchAdd, kRes + 8, 8, rs.remote[static_cast<size_t>(p)].addr, rs.rkey(p), 1);
      }
      wait(l);
      // Only the new version's holder remains a sharer.
      std::memset(sh, 0, static_cast<size_t>(n));
      sh[rank] = 1;
      post(l, mgr, fabric::Opcode::Write, kShare, static_cast<uint32_t>(n), rs.dir_addr(mgr, b) + 16, rs.rkey(mgr));
    }

    // 6. Publish: fixed home takes the merged block back (one coarse WRITE); then the entry's
    //    wts and the unlocking CAS, on one queue pair, in that order.
    if (fixed && mgr != rank)
      post(l, mgr, fabric::Opcode::Write, kLaneScratch, static_cast<uint32_t>(bs), rs.pub_addr(mgr, b), rs.rkey(mgr));
    //    Nothing below needs their completion, so the release goes on to its next block and the
    //    fence waits for all of them at its end (the entry is ours while W is set: every other
    //    CAS on it fails without writing).
    if (fixed && mgr != rank) wait(l);  // the staging buffer is reused by the next block
    // A ring slot per posted timestamp: post() drains the lane before 64 are in flight.
    const size_t woff = kWtsRing + 8 * (l.next_id % 64);
    std::memcpy(scratch(l, woff), &wts_new, 8);
    post(l, mgr, fabric::Opcode::Write, woff, 8, rs.dir_addr(mgr, b) + 8, rs.rkey(mgr));
    uint64_t w0_new = make_w0(home_new, rts_new);
    post(l, mgr, fabric::Opcode::CompareSwap, kRes + 48, 8, rs.dir_addr(mgr, b), rs.rkey(mgr), old | kW, w0_new);

    // 7. Our private copy is now the new version (merge_diff wrote the others' changes into it;
    //    writers here wait on the block's mutex).
    m.state = State::Clean;
    m.data_wts = wts_new;
    m.hint_home = home_new;
    m.hint_wts = wts_new;
    m.rts = dir_mode ? UINT64_MAX : rts_new;
    m.word0 = w0_new;
    m.known_wts = std::max(m.known_wts, wts_new);
    if (!dir_mode) {
      std::lock_guard<std::mutex> g(notice_mu);
      notices.add(Notice{(uint64_t{rs.r->id()} << 32) | b, wts_new, static_cast<uint32_t>(rank)});
    }
    st_released.fetch_add(1, std::memory_order_relaxed);
  }

  void invalidate(RegionState& rs, BlockMeta& m) {
    m.state = State::Invalid;
    rs.r->protect(m.block, 1, region::Protection::None);
    st_inval.fetch_add(1, std::memory_order_relaxed);
  }

  // A copy that may be stale after an acquire: a dirty one is published first (which makes it
  // current), a clean one is invalidated.
  void drop(std::optional<LaneGuard>& lane, RegionState& rs, BlockMeta& m) {
    if (m.state == State::Dirty) {
      if (!lane) lane.emplace(*this);
      release_block(**lane, rs, m);
    } else if (m.state == State::Clean) {
      invalidate(rs, m);
    }
  }

  // ---- fences ------------------------------------------------------------------------------

  void release_locked() {
    DirtyList taken;
    {
      std::lock_guard<std::mutex> g(dirty_mu);
      taken.swap(dirty);
    }
    if (taken.empty()) return;
    std::vector<BlockMeta*> v;
    while (!taken.empty()) {
      v.push_back(&taken.front());
      taken.pop_front();
    }
    std::sort(v.begin(), v.end(), [](const BlockMeta* a, const BlockMeta* b) {
      return a->region_slot != b->region_slot ? a->region_slot < b->region_slot : a->block < b->block;
    });
    // Stop this process's writers on every dirty block with one mprotect per run of adjacent
    // blocks: each call costs a TLB shootdown across the process's threads. A writer that
    // faults on a block before its turn below finds it still dirty and retries until it is
    // released.
    for (size_t i = 0; i < v.size();) {
      size_t j = i + 1;
      while (j < v.size() && v[j]->region_slot == v[i]->region_slot && v[j]->block == v[j - 1]->block + 1) ++j;
      regions[v[i]->region_slot].load(std::memory_order_acquire)->r->protect(v[i]->block, j - i, region::Protection::Read);
      i = j;
    }
    LaneGuard lane(*this);
    for (BlockMeta* m : v) {
      RegionState* rs = regions[m->region_slot].load(std::memory_order_acquire);
      std::lock_guard<std::mutex> g(m->mu);
      if (m->state == State::Dirty) release_block(*lane, *rs, *m, true);
    }
    wait(*lane);  // every entry unlocked: the release is complete
  }

  void release() {
    region::InRuntime ir;
    std::lock_guard<std::mutex> g(fence_mu);
    release_locked();
  }

  // Applies what this process now knows: notices newer than the copies, the lease bound, and
  // (directory policy) the invalidation flags other releasers set here. fence_mu held.
  void acquire_locked(uint64_t incoming_min_wts) {
    std::optional<LaneGuard> lane;
    std::vector<Notice> fresh;
    {
      std::lock_guard<std::mutex> g(notice_mu);
      for (const Notice& e : notices.entries()) {
        RegionState* rs = state_by_id(static_cast<uint32_t>(e.key >> 32));
        if (rs == nullptr) continue;  // a region destroyed since
        size_t b = e.key & 0xffffffffu;
        if (b >= rs->r->blocks()) continue;
        if (e.wts <= rs->meta[b].known_wts) continue;
        fresh.push_back(e);
      }
    }
    for (const Notice& e : fresh) {
      RegionState* rs = state_by_id(static_cast<uint32_t>(e.key >> 32));
      BlockMeta& m = rs->meta[e.key & 0xffffffffu];
      std::lock_guard<std::mutex> g(m.mu);
      if (e.wts <= m.known_wts) continue;
      m.known_wts = e.wts;
      if (m.data_wts >= e.wts) continue;
      // Fast read: the next miss goes straight to the last releaser's public copy.
      if (e.wts > m.hint_wts) {
        m.hint_home = static_cast<int>(e.writer);
        m.hint_wts = e.wts;
      }
      drop(lane, *rs, m);
    }
    if (incoming_min_wts > acq_ts) {
      std::atomic_ref<uint64_t>(acq_ts).store(incoming_min_wts, std::memory_order_relaxed);
      // Notices were folded somewhere: every copy whose lease ended before now is suspect.
      for (auto& a : regions) {
        RegionState* rs = a.load(std::memory_order_acquire);
        if (rs == nullptr) continue;
        for (size_t b = 0; b < rs->r->blocks(); ++b) {
          BlockMeta& m = rs->meta[b];
          if (m.state == State::Invalid) continue;
          std::lock_guard<std::mutex> g(m.mu);
          if (m.state != State::Invalid && m.rts < acq_ts) drop(lane, *rs, m);
        }
      }
    }
    if (cfg.policy.invalidation == Invalidation::Directory) {
      for (auto& a : regions) {
        RegionState* rs = a.load(std::memory_order_acquire);
        if (rs == nullptr) continue;
        uint64_t c = rs->inval_counter().load(std::memory_order_acquire);
        if (c == rs->inval_seen) continue;
        rs->inval_seen = c;
        uint8_t* flags = rs->mem.bytes() + rs->flag_off;
        size_t nb = rs->r->blocks();
        for (size_t b = 0; b < nb; b += 8) {
          uint64_t w = 0;
          size_t k = std::min<size_t>(8, nb - b);
          std::memcpy(&w, flags + b, k);
          if (w == 0) continue;
          for (size_t j = 0; j < k; ++j) {
            if (std::atomic_ref<uint8_t>(flags[b + j]).exchange(0) == 0) continue;
            BlockMeta& m = rs->meta[b + j];
            std::lock_guard<std::mutex> g(m.mu);
            m.hint_wts = UINT64_MAX;  // unknown version: the directory says which
            drop(lane, *rs, m);
          }
        }
      }
    }
  }

  // An acquire of the notices a synchronization object carried. fence_mu held.
  template <typename... What>
  void acquire_wire(std::span<const uint8_t> bytes, const What&... from) {
    uint64_t min_wts;
    {
      std::lock_guard<std::mutex> g(notice_mu);
      if (!notices.merge_wire(bytes, static_cast<uint32_t>(n))) fail("dsm: malformed write notices from ", from...);
      min_wts = notices.min_wts();
    }
    acquire_locked(min_wts);
  }

  size_t serialize_notices(uint8_t* out) {
    std::lock_guard<std::mutex> g(notice_mu);
    return notices.serialize(out);
  }

  // ---- synchronization memory ---------------------------------------------------------------
  uint64_t slot_addr(int to, uint32_t slot) const { return sync_remote[static_cast<size_t>(to)].addr + slot_off + slot * slot_bytes; }
  uint32_t sync_rkey(int to) const { return sync_remote[static_cast<size_t>(to)].rkey; }
  uint8_t* slot_local(uint32_t slot) const { return sync.bytes() + slot_off + slot * slot_bytes; }
  size_t qnode_index(int tslot, int depth) const { return static_cast<size_t>(tslot) * kMaxHeld + static_cast<size_t>(depth); }
  uint64_t qnode_addr(int to, size_t idx) const { return sync_remote[static_cast<size_t>(to)].addr + qnode_off + idx * 16; }
  uint64_t* qnode_local(size_t idx) const { return reinterpret_cast<uint64_t*>(sync.bytes() + qnode_off + idx * 16); }
  uint8_t* mbox_local(int round, int parity) const { return sync.bytes() + mbox_off + static_cast<size_t>(round * 2 + parity) * mbox_bytes; }
  uint64_t mbox_addr(int to, int round, int parity) const {
    return sync_remote[static_cast<size_t>(to)].addr + mbox_off + static_cast<size_t>(round * 2 + parity) * mbox_bytes;
  }
  size_t notice_cap_bytes() const { return notice_wire_bytes(cfg.notices); }
};

// ---- Space -----------------------------------------------------------------------------------

Space::Space(Runtime& rt, Config cfg) : rt_(rt), cfg_(cfg) {
  Space* expected = nullptr;
  if (!g_current.compare_exchange_strong(expected, this)) fail("dsm: one Space per process at a time");
  try {
    impl_ = std::make_unique<Impl>(*this, rt, cfg);
    Impl& I = *impl_;
    if (cfg.policy.invalidation == Invalidation::Directory && I.n > 4096) fail("dsm: the directory policy supports up to 4096 processes");
    if (I.n > 0x7fff) fail("dsm: at most 32767 processes");
    I.as = std::make_unique<region::AddressSpace>(rt.bootstrap(), cfg.reserve, *this);

    // Lanes: one per worker thread and one spare, each a full set of connected QPs.
    int nlanes = rt.threads_per_process() + 1;
    fabric::QpCaps caps;
    caps.max_send_wr = 64;
    caps.max_recv_wr = 1;
    caps.max_inline = 0;
    std::vector<fabric::QueuePair*> raw;
    for (int i = 0; i < nlanes; ++i) {
      auto l = std::make_unique<Lane>();
      l->cq = rt.provider().create_cq(caps.max_send_wr * static_cast<uint32_t>(I.n));
      for (int r = 0; r < I.n; ++r) {
        l->qps.push_back(rt.provider().create_qp(r, *l->cq, *l->cq, caps));
        raw.push_back(l->qps.back().get());
      }
      l->scratch = rt.allocator().allocate_chunk(kLaneScratch + kMaxBlock);
      I.lanes.push_back(std::move(l));
    }
    // connect_all pairs the i-th QP of every rank for peer r; ours are in (lane, rank) order.
    for (int i = 0; i < nlanes; ++i) {
      std::vector<fabric::QueuePair*> part(raw.begin() + i * I.n, raw.begin() + (i + 1) * I.n);
      runtime::connect_all(rt.bootstrap(), part);
    }

    // Synchronization memory.
    I.rounds = 0;
    while ((1 << I.rounds) < I.n) ++I.rounds;
    I.mbox_bytes = (I.notice_cap_bytes() + 8 + 63) & ~size_t{63};
    I.slot_bytes = (64 + I.notice_cap_bytes() + 63) & ~size_t{63};
    I.mbox_off = 0;
    I.slot_off = I.mbox_off + static_cast<size_t>(std::max(I.rounds, 1) * 2) * I.mbox_bytes;
    I.qnode_off = I.slot_off + cfg.sync_objects * I.slot_bytes;
    size_t sync_bytes = I.qnode_off + static_cast<size_t>(kMaxThreads) * kMaxHeld * 16;
    I.sync = rt.allocator().allocate_chunk(sync_bytes);
    std::memset(I.sync.addr, 0, I.sync.size);
    I.sync_remote = rt.bootstrap().allgather_value(locator_of(I.sync, I.rank));
    rt.barrier();
  } catch (...) {
    g_current.store(nullptr);
    throw;
  }
}

Space::~Space() {
  Impl& I = *impl_;
  try {
    I.release();
    rt_.barrier();
    for (auto& a : I.regions) {
      RegionState* rs = a.exchange(nullptr);
      if (rs == nullptr) continue;
      munmap(rs->twins, rs->r->size());
      rt_.allocator().free_chunk(rs->mem);
      delete rs;
    }
    // Peers' requests on our QPs are done once everyone is here.
    rt_.barrier();
  } catch (const std::exception& e) {
    log::error("dsm: Space teardown: ", e.what());
  }
  for (auto& l : I.lanes) rt_.allocator().free_chunk(l->scratch);
  I.lanes.clear();
  rt_.allocator().free_chunk(I.sync);
  I.as.reset();
  g_current.store(nullptr);
}

Space& Space::current() {
  Space* s = g_current.load(std::memory_order_acquire);
  if (s == nullptr) fail("dsm: no Space in this process");
  return *s;
}

region::AddressSpace& Space::address_space() { return *impl_->as; }

Stats Space::stats() const {
  const Impl& I = *impl_;
  Stats s;
  s.faults = I.st_faults.load();
  s.read_misses = I.st_misses.load();
  s.revalidations = I.st_reval.load();
  s.twins = I.st_twins.load();
  s.released_blocks = I.st_released.load();
  s.fetch_retries = I.st_retries.load();
  s.invalidations = I.st_inval.load();
  s.fast_reads = I.st_fast.load();
  return s;
}

region::Region& Space::create_region(const region::RegionOptions& opt) {
  Impl& I = *impl_;
  region::Region& r = I.as->create(opt);
  auto rs = std::make_unique<RegionState>();
  rs->r = &r;
  const size_t nb = r.blocks();
  const bool dir_mode = cfg_.policy.invalidation == Invalidation::Directory;
  rs->dir_stride = (16 + (dir_mode ? static_cast<size_t>(I.n) : 0) + 15) & ~size_t{15};
  rs->pub_off = kRegionHeader;
  rs->dir_off = rs->pub_off + r.size();
  rs->flag_off = rs->dir_off + nb * rs->dir_stride;
  size_t bytes = rs->flag_off + nb;
  try {
    rs->mem = rt_.allocator().allocate_chunk(bytes);
  } catch (...) {
    I.as->destroy(r);
    throw;
  }
  std::memset(rs->mem.addr, 0, bytes);
  rs->meta = std::unique_ptr<BlockMeta[]>(new BlockMeta[nb]);
  for (size_t b = 0; b < nb; ++b) {
    int mgr = r.manager(b);
    BlockMeta& m = rs->meta[b];
    m.block = static_cast<uint32_t>(b);
    m.hint_home = mgr;
    m.word0 = make_w0(mgr, 0);
    // Every copy starts as the zero version 0, valid until the first write is acquired.
    m.rts = dir_mode ? UINT64_MAX : 0;
    if (mgr == I.rank) {
      uint8_t* e = rs->mem.bytes() + rs->dir_off + b * rs->dir_stride;
      uint64_t w0 = make_w0(mgr, 0);
      std::memcpy(e, &w0, 8);
      if (dir_mode) std::memset(e + 16, 1, static_cast<size_t>(I.n));
    }
  }
  void* tw = mmap(nullptr, r.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (tw == MAP_FAILED) {
    rt_.allocator().free_chunk(rs->mem);
    I.as->destroy(r);
    throw SystemError("dsm: mmap of the twin area", errno);
  }
  rs->twins = static_cast<uint8_t*>(tw);
  rs->remote = rt_.bootstrap().allgather_value(locator_of(rs->mem, I.rank));
  {
    // Touch every peer's region memory once now: a provider may map peer memory on first use
    // (shm does), which allocates, and the fault handler must not be the first to get there.
    region::InRuntime ir;
    Impl::LaneGuard lane(I);
    for (int p = 0; p < I.n; ++p)
      I.post(*lane, p, fabric::Opcode::Read, Impl::kRes, 8, rs->remote[static_cast<size_t>(p)].addr, rs->remote[static_cast<size_t>(p)].rkey);
    I.wait(*lane);
  }
  int slot = -1;
  for (size_t i = 0; i < I.regions.size(); ++i)
    if (I.regions[i].load() == nullptr) {
      slot = static_cast<int>(i);
      break;
    }
  rs->slot = static_cast<uint32_t>(slot);
  for (size_t b = 0; b < nb; ++b) rs->meta[b].region_slot = rs->slot;
  I.regions[static_cast<size_t>(slot)].store(rs.release(), std::memory_order_release);
  rt_.barrier();  // every directory is initialized before anyone uses it
  return r;
}

void Space::destroy_region(region::Region& r) {
  Impl& I = *impl_;
  RegionState* rs = I.state_of(r);
  if (rs == nullptr) fail("dsm: destroy_region of a region this Space does not hold");
  I.release();
  rt_.barrier();  // nobody reads our public copies any more
  {
    std::lock_guard<std::mutex> g(I.fence_mu);
    std::lock_guard<std::mutex> d(I.dirty_mu);
    for (size_t b = 0; b < r.blocks(); ++b)
      if (rs->meta[b].is_linked()) I.dirty.erase(I.dirty.iterator_to(rs->meta[b]));
    I.regions[rs->slot].store(nullptr, std::memory_order_release);
  }
  munmap(rs->twins, r.size());
  rt_.allocator().free_chunk(rs->mem);
  delete rs;
  I.as->destroy(r);
}

void Space::on_fault(region::Region& r, size_t block, bool write) {
  Impl& I = *impl_;
  RegionState* rs = I.state_of(r);
  if (rs == nullptr) {
    static const char msg[] = "loom: fault in a region without protocol state\n";
    ssize_t k = ::write(2, msg, sizeof msg - 1);
    (void)k;
    abort();
  }
  region::InRuntime ir;
  I.st_faults.fetch_add(1, std::memory_order_relaxed);
  bool busy = false;
  try {
    Impl::LaneGuard lane(I);
    BlockMeta& m = rs->meta[block];
    std::lock_guard<std::mutex> g(m.mu);
#if !defined(__x86_64__)
    if (!write && m.state == State::Clean) write = true;  // no error code here: a fault on a readable block is a write
#endif
    if (m.state == State::Invalid) I.fetch(*lane, *rs, m);
    if (write && m.state == State::Clean) I.make_dirty(*rs, m);
    // Still dirty yet not writable: a release has stopped writers on it and will reach it
    // soon. Give it the processor; the store faults again until then.
    else if (write && m.state == State::Dirty) busy = true;
  } catch (const std::exception& e) {
    log::error("dsm: fault on block ", block, " of region ", r.id(), ": ", e.what());
    abort();
  }
  if (busy) sched_yield();
}

void Space::declare_read(const void* p, size_t n) { declare(p, n, false); }
void Space::declare_write(void* p, size_t n) { declare(p, n, true); }

// Makes every block of [p, p+n) readable (and, for a write, dirty) without a fault.
void Space::declare(const void* p, size_t n, bool write) {
  Impl& I = *impl_;
  region::Region* r = I.as->find(p);
  if (r == nullptr || !r->contains(p, n))
    fail("dsm: ", write ? "write" : "read", " of ", n, " bytes at ", p, ": not inside one shared region");
  RegionState* rs = I.state_of(*r);
  if (n == 0) return;
  region::InRuntime ir;
  size_t first = r->block_of(p), last = r->block_of(static_cast<const uint8_t*>(p) + n - 1);
  std::optional<Impl::LaneGuard> lane;
  for (size_t b = first; b <= last; ++b) {
    BlockMeta& m = rs->meta[b];
    // A racy peek, confirmed under the mutex.
    if (m.state == State::Dirty || (!write && m.state == State::Clean)) continue;
    if (!lane) lane.emplace(I);
    std::lock_guard<std::mutex> g(m.mu);
    if (m.state == State::Invalid) I.fetch(**lane, *rs, m);
    if (write && m.state == State::Clean) I.make_dirty(*rs, m);
  }
}

void Space::release() { impl_->release(); }

// ---- barrier -----------------------------------------------------------------------------------

void Space::barrier() {
  Impl& I = *impl_;
  const int threads = rt_.threads_per_process();
  std::unique_lock<std::mutex> lk(I.bar_mu);
  uint64_t gen = I.bar_gen;
  if (++I.bar_arrived < threads) {
    I.bar_cv.wait(lk, [&] { return I.bar_gen != gen; });
    if (I.bar_error) std::rethrow_exception(I.bar_error);
    return;
  }
  I.bar_arrived = 0;
  lk.unlock();
  std::exception_ptr err;
  try {
    region::InRuntime ir;
    std::lock_guard<std::mutex> g(I.fence_mu);
    I.release_locked();
    // Dissemination: in round k, notices go to rank + 2^k and come from rank - 2^k; after
    // ceil(log2 n) rounds everyone holds the union of everyone's notices.
    uint64_t epoch = ++I.barrier_epoch;
    int parity = static_cast<int>(epoch & 1);
    Impl::LaneGuard lane(I);
    for (int k = 0; k < I.rounds; ++k) {
      int to = (I.rank + (1 << k)) % I.n;
      int from = ((I.rank - (1 << k)) % I.n + I.n) % I.n;
      size_t len = I.serialize_notices(I.scratch(*lane, Impl::kNotOut));
      I.post(*lane, to, fabric::Opcode::Write, Impl::kNotOut, static_cast<uint32_t>(len), I.mbox_addr(to, k, parity), I.sync_rkey(to));
      I.set_res(*lane, 3, epoch);
      // Same queue pair: the flag lands after the notices.
      I.post(*lane, to, fabric::Opcode::Write, Impl::kRes + 24, 8, I.mbox_addr(to, k, parity) + I.mbox_bytes - 8, I.sync_rkey(to));
      I.wait(*lane);
      uint8_t* box = I.mbox_local(k, parity);
      std::atomic_ref<uint64_t> flag(*reinterpret_cast<uint64_t*>(box + I.mbox_bytes - 8));
      signal::Backoff b(kHandoffYields);
      while (flag.load(std::memory_order_acquire) != epoch) {
        if (!I.rt.provider().peer_alive(from)) fail("dsm: barrier: rank ", from, " is gone");
        b.pause();
      }
      std::lock_guard<std::mutex> ng(I.notice_mu);
      if (!I.notices.merge_wire(std::span<const uint8_t>(box, I.mbox_bytes - 8), static_cast<uint32_t>(I.n)))
        fail("dsm: barrier: malformed write notices from rank ", from);
    }
    I.acquire_locked(I.notices.min_wts());
  } catch (...) {
    err = std::current_exception();
  }
  lk.lock();
  I.bar_error = err;
  ++I.bar_gen;
  lk.unlock();
  I.bar_cv.notify_all();
  if (err) std::rethrow_exception(err);
}

// ---- locks -------------------------------------------------------------------------------------

namespace {
struct Held {
  Space* space;
  uint32_t slot;
  int depth;
};
thread_local std::array<Held, kMaxHeld> t_held;
thread_local int t_nheld = 0;
thread_local uint32_t t_depth_used = 0;  // bitmask of queue nodes in use by this thread
}  // namespace

Lock Space::make_lock() {
  Impl& I = *impl_;
  if (I.next_sync >= cfg_.sync_objects) fail("dsm: more than ", cfg_.sync_objects, " locks and atomic words (LOOM_DSM_SYNC_OBJECTS)");
  Lock l;
  l.bind(this, I.next_sync++, I.n);
  return l;
}

void Lock::lock() {
  if (space_ == nullptr) fail("dsm: lock() on a Lock not made by Space::make_lock");
  Space::Impl& I = *space_->impl_;
  for (int i = 0; i < t_nheld; ++i)
    if (t_held[static_cast<size_t>(i)].space == space_ && t_held[static_cast<size_t>(i)].slot == slot_)
      fail("dsm: this thread already holds lock ", slot_);
  if (t_nheld >= kMaxHeld) fail("dsm: a thread may hold at most ", kMaxHeld, " locks");
  int depth = std::countr_one(t_depth_used);
  int ts = thread_slot();
  size_t idx = I.qnode_index(ts, depth);
  uint64_t* q = I.qnode_local(idx);
  std::atomic_ref<uint64_t>(q[0]).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(q[1]).store(0, std::memory_order_release);
  const uint64_t me = (static_cast<uint64_t>(I.rank) << 32) | (idx + 1);
  const uint64_t tail = I.slot_addr(home_, slot_);
  region::InRuntime ir;
  uint64_t pred;
  {
    Space::Impl::LaneGuard lane(I);
    uint64_t guess = 0;
    for (;;) {
      pred = I.cas(*lane, home_, tail, I.sync_rkey(home_), guess, me);
      if (pred == guess) break;
      guess = pred;
    }
    if (pred != 0) {
      uint64_t prank = pred >> 32, pidx = (pred & 0xffffffffu) - 1;
      if (prank >= static_cast<uint64_t>(I.n) || pidx >= static_cast<uint64_t>(kMaxThreads) * kMaxHeld)
        fail("dsm: lock ", slot_, " names queue node ", pred, " (corrupt)");
      I.set_res(*lane, 4, me);
      I.post(*lane, static_cast<int>(prank), fabric::Opcode::Write, Space::Impl::kRes + 32, 8, I.qnode_addr(static_cast<int>(prank), pidx),
             I.sync_rkey(static_cast<int>(prank)));
      I.wait(*lane);
    }
  }
  if (pred != 0) {
    std::atomic_ref<uint64_t> granted(q[1]);
    signal::Backoff b(kHandoffYields);
    while (granted.load(std::memory_order_acquire) == 0) b.pause();
  }
  t_depth_used |= 1u << depth;
  t_held[static_cast<size_t>(t_nheld++)] = Held{space_, slot_, depth};
  // Acquire: the notices the last holder left with the lock.
  std::lock_guard<std::mutex> g(I.fence_mu);
  Space::Impl::LaneGuard lane(I);
  size_t len = I.notice_cap_bytes();
  I.post(*lane, home_, fabric::Opcode::Read, Space::Impl::kNotIn, static_cast<uint32_t>(len), tail + 64, I.sync_rkey(home_));
  I.wait(*lane);
  I.acquire_wire(std::span<const uint8_t>(I.scratch(*lane, Space::Impl::kNotIn), len), "lock ", slot_);
}

void Lock::unlock() {
  if (space_ == nullptr) fail("dsm: unlock() on a Lock not made by Space::make_lock");
  Space::Impl& I = *space_->impl_;
  int at = -1;
  for (int i = 0; i < t_nheld; ++i)
    if (t_held[static_cast<size_t>(i)].space == space_ && t_held[static_cast<size_t>(i)].slot == slot_) at = i;
  if (at < 0) fail("dsm: unlock of lock ", slot_, ", which this thread does not hold");
  int depth = t_held[static_cast<size_t>(at)].depth;
  size_t idx = I.qnode_index(thread_slot(), depth);
  uint64_t* q = I.qnode_local(idx);
  const uint64_t me = (static_cast<uint64_t>(I.rank) << 32) | (idx + 1);
  const uint64_t tail = I.slot_addr(home_, slot_);
  region::InRuntime ir;
  {
    std::lock_guard<std::mutex> g(I.fence_mu);
    I.release_locked();
    Space::Impl::LaneGuard lane(I);
    // The notices go with the lock, then the tail is swung back if nobody queued (same QP).
    size_t len = I.serialize_notices(I.scratch(*lane, Space::Impl::kNotOut));
    I.post(*lane, home_, fabric::Opcode::Write, Space::Impl::kNotOut, static_cast<uint32_t>(len), tail + 64, I.sync_rkey(home_));
    uint64_t next = std::atomic_ref<uint64_t>(q[0]).load(std::memory_order_acquire);
    bool handed = false;
    if (next == 0) {
      I.post(*lane, home_, fabric::Opcode::CompareSwap, Space::Impl::kRes, 8, tail, I.sync_rkey(home_), me, 0);
      I.wait(*lane);
      handed = I.res(*lane, 0) == me;
    } else {
      I.wait(*lane);
    }
    if (!handed) {
      std::atomic_ref<uint64_t> nx(q[0]);
      signal::Backoff b(kHandoffYields);
      while ((next = nx.load(std::memory_order_acquire)) == 0) b.pause();
      uint64_t nrank = next >> 32, nidx = (next & 0xffffffffu) - 1;
      if (nrank >= static_cast<uint64_t>(I.n) || nidx >= static_cast<uint64_t>(kMaxThreads) * kMaxHeld)
        fail("dsm: lock ", slot_, ": successor ", next, " (corrupt)");
      I.set_res(*lane, 5, 1);
      I.post(*lane, static_cast<int>(nrank), fabric::Opcode::Write, Space::Impl::kRes + 40, 8, I.qnode_addr(static_cast<int>(nrank), nidx) + 8,
             I.sync_rkey(static_cast<int>(nrank)));
      I.wait(*lane);
    }
  }
  t_depth_used &= ~(1u << depth);
  t_held[static_cast<size_t>(at)] = t_held[static_cast<size_t>(t_nheld - 1)];
  --t_nheld;
}

// ---- atomic words ------------------------------------------------------------------------------
//
// Slot: [0] notice lock, [8] value, [64..] notices of every release made through this word
// (merged, since several releasers may precede one acquirer).

AtomicWord Space::make_atomic(uint64_t initial) {
  Impl& I = *impl_;
  if (I.next_sync >= cfg_.sync_objects) fail("dsm: more than ", cfg_.sync_objects, " locks and atomic words (LOOM_DSM_SYNC_OBJECTS)");
  AtomicWord a;
  a.bind(this, I.next_sync++, I.n);
  if (a.home_ == I.rank) std::memcpy(I.slot_local(a.slot_) + 8, &initial, 8);
  rt_.barrier();
  return a;
}

namespace {

uint64_t atomic_op(Space::Impl& I, int home, uint32_t slot, fabric::Opcode op, uint64_t a, uint64_t b, Order o) {
  const uint64_t base = I.slot_addr(home, slot);
  const uint32_t rkey = I.sync_rkey(home);
  const bool rel = o == Order::Release || o == Order::AcqRel;
  const bool acq = o == Order::Acquire || o == Order::AcqRel;
  const uint64_t me = static_cast<uint64_t>(I.rank) + 1;
  const size_t cap = I.notice_cap_bytes();
  region::InRuntime ir;
  std::lock_guard<std::mutex> g(I.fence_mu);
  if (rel) I.release_locked();
  Space::Impl::LaneGuard lane(I);
  auto lock_notices = [&] {
    signal::Backoff bo;
    while (I.cas(*lane, home, base, rkey, 0, me) != 0) bo.pause();
  };
  auto unlock_notices = [&] {
    I.post(*lane, home, fabric::Opcode::CompareSwap, Space::Impl::kRes + 48, 8, base, rkey, me, 0);
  };
  if (rel) {
    // Merge our notices into the word's, so an acquirer sees every release before its read.
    lock_notices();
    I.post(*lane, home, fabric::Opcode::Read, Space::Impl::kNotIn, static_cast<uint32_t>(cap), base + 64, rkey);
    I.wait(*lane);
    NoticeBuffer merged(I.cfg.notices);
    if (!merged.merge_wire(std::span<const uint8_t>(I.scratch(*lane, Space::Impl::kNotIn), cap), static_cast<uint32_t>(I.n)))
      merged.clear();  // corrupt: replaced by ours, which is what this release must carry
    {
      std::lock_guard<std::mutex> ng(I.notice_mu);
      merged.merge(I.notices);
    }
    size_t len = merged.serialize(I.scratch(*lane, Space::Impl::kNotOut));
    I.post(*lane, home, fabric::Opcode::Write, Space::Impl::kNotOut, static_cast<uint32_t>(len), base + 64, rkey);
    unlock_notices();
    I.wait(*lane);
  }
  uint64_t old;
  if (op == fabric::Opcode::Read) {
    I.post(*lane, home, fabric::Opcode::FetchAdd, Space::Impl::kRes, 8, base + 8, rkey, 0);
  } else {
    I.post(*lane, home, op, Space::Impl::kRes, 8, base + 8, rkey, a, b);
  }
  I.wait(*lane);
  old = I.res(*lane, 0);
  if (acq) {
    lock_notices();
    I.post(*lane, home, fabric::Opcode::Read, Space::Impl::kNotIn, static_cast<uint32_t>(cap), base + 64, rkey);
    unlock_notices();
    I.wait(*lane);
    I.acquire_wire(std::span<const uint8_t>(I.scratch(*lane, Space::Impl::kNotIn), cap), "atomic word ", slot);
  }
  return old;
}

}  // namespace

uint64_t AtomicWord::fetch_add(uint64_t v, Order o) {
  if (space_ == nullptr) fail("dsm: use of an AtomicWord not made by Space::make_atomic");
  return atomic_op(*space_->impl_, home_, slot_, fabric::Opcode::FetchAdd, v, 0, o);
}

uint64_t AtomicWord::compare_swap(uint64_t expected, uint64_t desired, Order o) {
  if (space_ == nullptr) fail("dsm: use of an AtomicWord not made by Space::make_atomic");
  return atomic_op(*space_->impl_, home_, slot_, fabric::Opcode::CompareSwap, expected, desired, o);
}

uint64_t AtomicWord::load(Order o) {
  if (space_ == nullptr) fail("dsm: use of an AtomicWord not made by Space::make_atomic");
  if (o == Order::Release || o == Order::AcqRel) fail("dsm: a load cannot be a release");
  return atomic_op(*space_->impl_, home_, slot_, fabric::Opcode::Read, 0, 0, o);
}

void AtomicWord::store(uint64_t v, Order o) {
  if (space_ == nullptr) fail("dsm: use of an AtomicWord not made by Space::make_atomic");
  if (o == Order::Acquire || o == Order::AcqRel) fail("dsm: a store cannot be an acquire");
  Space::Impl& I = *space_->impl_;
  // A CAS loop: the word is touched only by fabric atomics. The first attempt releases.
  uint64_t cur = atomic_op(I, home_, slot_, fabric::Opcode::Read, 0, 0, o);
  for (;;) {
    uint64_t old = atomic_op(I, home_, slot_, fabric::Opcode::CompareSwap, cur, v, Order::Relaxed);
    if (old == cur) return;
    cur = old;
  }
}

}  // namespace loom::coherence
