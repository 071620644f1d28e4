#pragma once
// Space::Impl: the state of one process's Space and the protocol steps over it. Its state is
// grouped by owner (the fence, dirty blocks, write notices, the barrier, exclusive blocks,
// synchronization memory, statistics), each group with the lock that guards it; the lock order
// is stated once, above Space::Impl. Its members are defined by concern: lanes (lane.cpp), the
// read path (read_path.cpp), the release path (release_path.cpp), acquire (acquire.cpp), regions
// (regions.cpp), synchronization memory and the Space's life (space.cpp), barrier, lock and
// atomic words (barrier.cpp, lock.cpp, atomic_word.cpp). docs/coherence.md numbers the steps
// these functions carry out.
#include <array>
#include <boost/container/static_vector.hpp>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

#include "loom/coherence/block_state.hpp"
#include "loom/coherence/lane.hpp"
#include "loom/coherence/notices.hpp"
#include "loom/coherence/space.hpp"

namespace loom::coherence {

inline constexpr int kMaxThreads = 64;  // threads of one process that use shared regions at once
inline constexpr int kMaxHeld = 16;     // locks one thread may hold (or wait for) at once
// Yields before a waiter for a lock hand-off or a barrier partner starts timed sleeps.
inline constexpr uint32_t kHandoffYields = 4096;

// Synchronization memory of one process, the same layout at every process:
// [barrier mailboxes: 2 parities x rounds][sync-object slots][queue-lock nodes: 16 B each].
struct SyncLayout {
  size_t mbox_bytes = 0, mbox_off = 0, slot_bytes = 0, slot_off = 0, qnode_off = 0, total = 0;
  int rounds = 0;  // dissemination rounds: ceil(log2 nprocs)
  SyncLayout() = default;
  SyncLayout(int nprocs, uint32_t sync_objects, size_t notice_bytes);
};

// What a release publishes: a plain release, one that may claim the block exclusively, or the
// downgrade of an exclusive block another process asked for.
enum class Publication : uint8_t { Release, MayClaim, Downgrade };

// A version to read: its home and write timestamp (kUnknownWts: the directory says which).
inline constexpr uint64_t kUnknownWts = UINT64_MAX;

// A directory entry as read into a lane's scratch (Scratch::kDirectory).
struct DirView {
  DirWord word0;
  uint64_t wts = 0;
  const uint8_t* sharers = nullptr;  // n bytes, directory policy only
};

// Synchronization memory: made by create_sync_memory (space.cpp); lock.cpp and atomic_word.cpp
// hand out its slots, barrier.cpp uses its mailboxes.
struct SyncMemory {
  memory::RDMAMemory mem;
  std::vector<RemoteMemoryLocator> remote;  // every process's, by rank
  SyncLayout layout;
  uint32_t next_slot = 0;  // slots go out in collective calls: the same order at every process

  uint64_t base(int to) const { return remote[static_cast<size_t>(to)].addr; }
  uint32_t rkey(int to) const { return remote[static_cast<size_t>(to)].rkey; }
  uint64_t slot_addr(int to, uint32_t slot) const { return base(to) + layout.slot_off + slot * layout.slot_bytes; }
  uint8_t* slot_local(uint32_t slot) const { return mem.bytes() + layout.slot_off + slot * layout.slot_bytes; }
  static size_t qnode_index(int tslot, int depth) { return static_cast<size_t>(tslot) * kMaxHeld + static_cast<size_t>(depth); }
  uint64_t qnode_addr(int to, size_t idx) const { return base(to) + layout.qnode_off + idx * 16; }
  uint64_t* qnode_local(size_t idx) const { return reinterpret_cast<uint64_t*>(mem.bytes() + layout.qnode_off + idx * 16); }
  size_t mbox_offset(int round, int parity) const {
    return layout.mbox_off + static_cast<size_t>(round * 2 + parity) * layout.mbox_bytes;
  }
  uint8_t* mbox_local(int round, int parity) const { return mem.bytes() + mbox_offset(round, parity); }
  uint64_t mbox_addr(int to, int round, int parity) const { return base(to) + mbox_offset(round, parity); }
};

// The counters behind Space::stats, each named as its Stats field; every path counts relaxed.
struct Counters {
  std::atomic<uint64_t> faults{0}, read_misses{0}, revalidations{0}, twins{0}, released_blocks{0}, merged_releases{0},
      fetch_retries{0}, invalidations{0}, fast_reads{0}, exclusive_claims{0}, downgrades{0}, downgrades_asked{0},
      notices{0}, bytes_fetched{0}, races{0}, intervals{0}, run_blocks{0}, refreshes{0};
  Stats snapshot() const;  // space.cpp
};

// Lock order, outermost first: a thread holding one of these takes only those below it.
//   barrier.mu          the process's threads meeting (let go before the global barrier runs)
//   fence.mu            a release or an acquire of this process
//   exclusive.serve_mu  shared by a downgrade on the service thread, which never holds fence.mu;
//                       exclusive while a region's protocol state is freed (nothing else held)
//   BlockMeta::mu       block mutexes, several only in ascending (region slot, block) order
//   dirty.mu, notices.mu  leaves: nothing is taken under them
// Lanes stand outside the order: LaneGuard takes a free one by try_lock, and there is one per
// worker thread and one for the service thread (create_lanes), each thread holding at most one.
struct Space::Impl {
  Runtime& rt;
  const Config cfg;
  const int rank, n;
  const uint64_t lease;
  const bool fixed_home;
  const bool dir_mode;
  std::unique_ptr<region::AddressSpace> as;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::array<std::atomic<RegionState*>, region::AddressSpace::kMaxRegions> regions{};
  SyncMemory sync;
  int collectives_observer = 0;  // watch_process_barriers' handle (space.cpp)

  // Releases and acquires of this process, one at a time (release_path.cpp, acquire.cpp).
  struct Fence {
    std::mutex mu;
    uint64_t acq_ts = 0;  // the acquire time: written under mu, read relaxed by the read path
    // The latest write timestamp this process published or acquired: a release through an atomic
    // word in a region leaves it in the word's directory entry for its acquirers' lease bound.
    // Atomic: downgrades publish without mu.
    std::atomic<uint64_t> release_clock{0};
  } fence;

  // Blocks written since their last release: listed by the read path (read_path.cpp), taken by
  // a release (release_path.cpp).
  struct Dirty {
    std::mutex mu;
    DirtyList list;
  } dirty;

  // Write notices (notices.hpp): releases add them, acquires apply them, barriers exchange them.
  struct Notices {
    std::mutex mu;
    NoticeBuffer buffer;
    uint64_t applied = 0;  // buffer.changes() when the last acquire applied them
    // Per dissemination round: buffer.changes() when this process last sent its notices to that
    // round's partner (always the same process), which has merged everything sent before.
    std::vector<uint64_t> sent;
    explicit Notices(size_t capacity) : buffer(capacity) {}
  } notices;

  // The barrier (barrier.cpp): the last thread of this process to arrive runs the global one.
  struct Barrier {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    uint64_t gen = 0;
    std::exception_ptr error;
    uint64_t epoch = 0;  // global barriers run; fence.mu held
  } barrier;

  // Exclusive blocks (exclusive.cpp): claims of the release in progress and the downgrade service.
  // A claimed block's mutex is held until its page is made writable in one call per run
  // (flush_claims).
  struct Claim {
    BlockMeta* m;
    std::unique_lock<std::mutex> held;
  };
  struct Exclusive {
    std::vector<Claim> claims;  // fence.mu held
    uint32_t downgrade_fn = 0;  // the service function serving downgrades
    // Held shared by a downgrade on the service thread, exclusively while a region's protocol
    // state is freed: a handler that published (and so let its asker go on, perhaps to the
    // collective destruction) may still be finishing.
    std::shared_mutex serve_mu;
    std::atomic<uint32_t> pause_us{0};  // Space::fault_inject_downgrade_pause
  } exclusive;
  static constexpr size_t kClaimWindow = 4096;  // released blocks of a region per halving of its claim window

  Counters stats;

  // Checking mode: Runtime::barrier() with region writes of this process unpublished is a
  // warning (that barrier orders nothing in regions; Space::barrier does).
  void watch_process_barriers();

  Impl(Runtime& r, Config c);

  // ---- life (space.cpp) ----
  void create_lanes();
  void create_sync_memory();
  void teardown();
  RegionState* state_of(const region::Region& r);
  RegionState* state_by_id(uint32_t id);

  // ---- regions (regions.cpp) ----
  std::unique_ptr<RegionState> make_region_state(region::Region& r);
  region::Region& start_region(region::Region& r, bool with_contents);
  void init_blocks(RegionState& rs, uint64_t t0);
  void expire_since(RegionState& rs, uint64_t t0);
  void touch_peers(RegionState& rs);
  void install(std::unique_ptr<RegionState> rs);
  void free_region_state(RegionState* rs);

  // ---- read path (read_path.cpp); the caller holds a lane, then the block's mutex ----
  // What one explicit access has asked an owner to downgrade (exclusive.cpp).
  struct DowngradeRun {
    int owner = -1;
    size_t first = 0, asked_end = 0;  // asked for [first, asked_end)
    size_t end = 0;                   // the access's blocks end here
  };
  static constexpr size_t kMaxDowngradeRun = 256;
  void fetch(Lane& l, RegionState& rs, BlockMeta& m, DowngradeRun* run = nullptr);
  bool read_entry(Lane& l, RegionState& rs, size_t b, DirView& d);
  void post_fetch_reads(Lane& l, RegionState& rs, size_t b, int home, bool have_data);
  // Directory policy: WRITE 1 into this process's sharer byte of block b's entry, on the
  // entry's queue pair (before the validating READ of the entry).
  void post_join_sharers(Lane& l, RegionState& rs, size_t b);
  // The entry names version (home, wts), unlocked, shared (not E, not atomic): a copy of it
  // read before is current.
  static bool names_version(const DirView& d, int home, uint64_t wts) {
    return !d.word0.locked() && !d.word0.exclusive() && !d.word0.atomic() && d.word0.home() == home && d.wts == wts;
  }
  bool extend_lease(Lane& l, RegionState& rs, size_t b, DirView& d, uint64_t wts);
  std::optional<DirWord> longer_lease(const RegionState& rs, size_t b, const DirView& d, uint64_t wts);
  DirView dir_view(Lane& l, const RegionState& rs, size_t b, size_t off = Scratch::kDirectory);
  bool take_copy(RegionState& rs, BlockMeta& m, const DirView& d, uint64_t wts);
  // Pipelined misses of an explicit access to many blocks (prefetch.cpp).
  struct Prefetch {
    BlockMeta* m;
    int home;
    uint64_t wts;
    bool ok;
    bool have = false;  // the private copy holds version wts: the entry alone confirms it
  };
  static constexpr size_t kMaxPrefetch = 32;  // block mutexes held at once (TSan tracks at most 64 per thread)
  static constexpr int kPrefetchRounds = 2;    // a batch's rounds of reads (prefetch.cpp)
  // A batch and the block mutexes it holds, in place: a fault's run fetches one inside the
  // SIGSEGV handler, where nothing may allocate.
  using PrefetchBatch = boost::container::static_vector<Prefetch, kMaxPrefetch>;
  using HeldBlocks = boost::container::static_vector<std::unique_lock<std::mutex>, kMaxPrefetch>;
  void prefetch(Lane& l, RegionState& rs, size_t begin, size_t end);
  void prefetch_batch(Lane& l, RegionState& rs, PrefetchBatch& batch);
  bool prefetch_round(Lane& l, RegionState& rs, PrefetchBatch& batch);
  void install_prefetched(Lane& l, RegionState& rs, PrefetchBatch& batch, std::span<const DirView> views);
  void aim_unknown(Lane& l, RegionState& rs, PrefetchBatch& batch);
  void extend_leases(Lane& l, RegionState& rs, PrefetchBatch& batch, std::span<DirView> views);
  void make_dirty(RegionState& rs, BlockMeta& m);
  void twin_block(RegionState& rs, BlockMeta& m);  // the twin and state Dirty; not yet listed or open
  void open_run(RegionState& rs, std::vector<std::unique_lock<std::mutex>>& held, size_t first);
  // Fault runs (fault_run.cpp): a fault on block m opens with it the following blocks the same
  // interval touched the last time (the same `key`: written_in for a write, read_in for a read).
  bool fault_run(Lane& l, RegionState& rs, BlockMeta& m, bool write, uint32_t key);
  HeldBlocks lock_run_after(RegionState& rs, size_t b, bool write, uint32_t key);
  void fetch_run(Lane& l, RegionState& rs, size_t b, HeldBlocks& run);
  size_t prefetch_cap(const RegionState& rs) const;
  void note_written(RegionState& rs, BlockMeta& m);  // release_path.cpp
  // The interval this process is in (fault runs' keys; 0 stands for never): the release fences
  // so far, counted in stats.intervals.
  uint32_t interval() const { return static_cast<uint32_t>(stats.intervals.load(std::memory_order_relaxed) + 1); }
  // Block m (its mutex held) opened for plain reads by a fault: read in this interval, and no
  // refresh streak yet (read_refresh.cpp).
  void opened_for_read(BlockMeta& m) const { m.read_in = interval(), m.refreshes = 0; }
  enum class Access : uint8_t { Read, Write, Overwrite };
  const void* declare(const void* p, size_t n, Access how);
  uint64_t acq_ts_relaxed() { return std::atomic_ref<uint64_t>(fence.acq_ts).load(std::memory_order_relaxed); }
  // Where a lease taken (or a version published) in block b must end at least: the acquire time,
  // or the newest chunk notice applied to b's chunk.
  uint64_t floor_after_install(RegionState& rs, size_t b);
  void fill_runtime_block(RegionState& rs, size_t b, const uint8_t* src);
  static constexpr size_t kMaxClaimRun = 32;  // claims flushed together (release_path.cpp)
  uint64_t lease_floor(const RegionState& rs, size_t b) {
    return std::max(acq_ts_relaxed(), rs.chunk_known[b / kChunkBlocks].load(std::memory_order_relaxed));
  }
  uint32_t dir_read_bytes() const { return static_cast<uint32_t>(DirEntry::read_bytes(dir_mode, n)); }
  // Entries read side by side into the lane lie this far apart (word0 stays 8-byte aligned).
  size_t entry_slot() const { return DirEntry::stride(dir_mode, n); }

  // ---- release path (release_path.cpp) ----
  // An entry a release locked ahead (lock_ahead.cpp): `old` is its word before the lock;
  // `unchanged` as lock_entry says it.
  struct EntryLock {
    bool held = false;
    bool unchanged = false;
    DirWord old;
  };
  bool release_block(Lane& l, RegionState& rs, BlockMeta& m, bool protected_already = false,
                     Publication how = Publication::Release, const EntryLock* ahead = nullptr);
  std::vector<EntryLock> lock_ahead(Lane& l, std::span<BlockMeta* const> win);
  bool post_lock_round(Lane& l, std::span<BlockMeta* const> win, std::vector<EntryLock>& got, std::vector<DirWord>& guess);
  void unlock_ahead(Lane& l, RegionState& rs, size_t b, DirWord old);
  void release_window(Lane& l, std::span<BlockMeta* const> win);
  void release_one(Lane& l, BlockMeta* m, const EntryLock* ahead);
  DirWord lock_entry(Lane& l, RegionState& rs, BlockMeta& m, bool& unchanged, bool may_flush_claims);
  bool only_lease_moved(Lane& l, RegionState& rs, BlockMeta& m, DirWord old);
  DirWord next_word0(DirWord old, uint64_t wts_new, Publication how, int mgr) const;
  void take_master(Lane& l, RegionState& rs, BlockMeta& m, int home, bool unchanged, uint8_t* master);
  void report_races(RegionState& rs, size_t b, const uint8_t* master);
  void invalidate_sharers(Lane& l, RegionState& rs, size_t b);
  void publish(Lane& l, RegionState& rs, size_t b, DirWord old, uint64_t wts_new, DirWord w0_new);
  void record(RegionState& rs, BlockMeta& m, uint64_t wts_new, DirWord w0_new);
  void pause_if_injected() const;  // exclusive.cpp: Space::fault_inject_downgrade_pause
  void take_version(BlockMeta& m, uint64_t wts_new, DirWord w0_new);
  void stop_writers(const std::vector<BlockMeta*>& v);
  void release_locked();
  void release();
  void invalidate(RegionState& rs, BlockMeta& m);
  void drop(std::optional<LaneGuard>& lane, RegionState& rs, BlockMeta& m);
  // Clean copies an acquire drops, closed with one mprotect per run of adjacent blocks of a
  // region instead of one per block (invalidation_run.cpp). Each block's mutex is held from its
  // change to Invalid until its page is closed, as invalidate() does for one; blocks join in
  // ascending order only (the order every holder of several block mutexes takes them).
  class InvalidationRun {
   public:
    explicit InvalidationRun(Impl& s) : s_(s) {}
    InvalidationRun(const InvalidationRun&) = delete;
    InvalidationRun& operator=(const InvalidationRun&) = delete;
    ~InvalidationRun();
    // Before locking block b of rs: the run is closed unless b extends it.
    void before_lock(const RegionState& rs, size_t b);
    // Drops m (its mutex held by g): a clean copy joins the run (b extends it: before_lock),
    // anything else is dropped as drop() does, after the run is closed.
    void drop(std::optional<LaneGuard>& lane, RegionState& rs, BlockMeta& m, std::unique_lock<std::mutex>& g);
    void close();  // the copies refreshed (read_refresh.cpp), the others' pages closed, the mutexes let go

   private:
    static constexpr size_t kMaxRun = kMaxClaimRun;  // TSan tracks at most 64 mutexes held by a thread
    void refresh();  // read_refresh.cpp
    void fetch(PrefetchBatch& batch);
    Impl& s_;
    RegionState* rs_ = nullptr;
    size_t first_ = 0;
    std::vector<std::unique_lock<std::mutex>> held_;  // blocks [first_, first_ + size)
    std::vector<bool> open_;                          // ... which were open for plain reads
    std::optional<LaneGuard>* lane_ = nullptr;        // the acquire's lane, taken on first use
  };
  // An open copy is refreshed at most this many acquires in a row; then it closes, and the
  // program's next read of it (a fault) shows it is still read (read_refresh.cpp).
  static constexpr uint8_t kMaxRefreshes = 8;
  Prefetch aim(const RegionState& rs, BlockMeta& m) const;  // a prefetch of m at its hint (prefetch.cpp)

  // ---- exclusive blocks (exclusive.cpp) ----
  bool claims_pay(const RegionState& rs) const;
  void age_claim_window(RegionState& rs, size_t released);
  void judge_claims(const std::vector<BlockMeta*>& v);
  void flush_claims(Lane& l);
  void make_exclusive_alone(RegionState& rs);
  // Asks the owner named by the exclusive word `seen` to downgrade block b and waits until the
  // entry has changed (then the entry says which version to read, or who holds it now).
  void request_downgrade(Lane& l, DirWord seen, RegionState& rs, size_t b, DowngradeRun* run = nullptr);
  std::vector<std::byte> serve_downgrade(std::span<const std::byte> payload, int from);
  void downgrade_run(Lane& l, RegionState& rs, std::vector<std::unique_lock<std::mutex>>& run, size_t first);
  void register_downgrade();
  void unregister_downgrade();

  // ---- acquire (acquire.cpp); fence.mu held ----
  void acquire_locked(uint64_t incoming_min_wts);
  void apply_notices(std::optional<LaneGuard>& lane);
  void apply_lease_bound(std::optional<LaneGuard>& lane, uint64_t incoming_min_wts);
  // A suspect clean copy (its lease passed by a bound) that no plain load can reach (its
  // application view closed) becomes invalid with its data kept, aimed at the version it holds:
  // its next access confirms it (fetch, prefetch). False, and nothing changed, for an open one.
  bool expire_closed(RegionState& rs, BlockMeta& m);
  // A clean copy whose lease the bound passed (revalidate.cpp).
  struct Suspect {
    // Where its revalidation stands: its entry to be read; kept, or being extended, with `word`;
    // to be dropped (unless its state changed meanwhile); settled.
    enum class Step : uint8_t { Read, Keep, Extending, Drop, Settled };
    RegionState* rs;
    BlockMeta* m;
    uint64_t bound;  // the copy is valid if its lease reaches this (fence.acq_ts, or a chunk notice's wts)
    DirWord word{};
    Step step = Step::Read;
  };
  void revalidate_expired(std::optional<LaneGuard>& lane, std::vector<Suspect>& suspects);
  void revalidate_batch(std::optional<LaneGuard>& lane, std::span<Suspect> batch);
  bool judge_entries(Lane& l, std::span<Suspect> batch);
  bool settle_suspects(std::optional<LaneGuard>& lane, std::span<Suspect> batch, bool last_round);
  void apply_invalidation_flags(std::optional<LaneGuard>& lane);
  void apply_chunk_notices(std::optional<LaneGuard>& lane, const std::vector<Notice>& chunks);
  template <typename... What>
  void acquire_wire(std::span<const uint8_t> bytes, const What&... from) {
    uint64_t min_wts;
    {
      std::lock_guard<std::mutex> g(notices.mu);
      if (!notices.buffer.merge_wire(bytes, static_cast<uint32_t>(n))) fail("coherence: malformed write notices from ", from...);
      min_wts = notices.buffer.min_wts();
    }
    acquire_locked(min_wts);
  }
  size_t serialize_notices(uint8_t* out);
  size_t serialize_notices_for_round(int k, uint8_t* out);

  // ---- barrier (barrier.cpp) ----
  void global_barrier(const runtime::CollectiveCall& call);
  void wait_for_threads(std::unique_lock<std::mutex>& lk, uint64_t gen, int threads);
  void exchange_notices(Lane& l, int round, int parity, uint64_t epoch, const runtime::CollectiveCall& call);

  // ---- locks (lock.cpp) ----
  void hand_on_lock(Lane& l, uint64_t* q, uint64_t me, int home, uint32_t slot, uint64_t tail);
  void wait_for_grant(const uint64_t* q, int prank, uint32_t slot, int home);

  // ---- atomic words (atomic_word.cpp) ----
  uint64_t atomic_op(int home, uint32_t slot, fabric::Opcode op, uint64_t a, uint64_t b, Order o);
  void merge_notices_into_word(Lane& l, int home, uint64_t base, uint32_t rkey);

  // ---- atomic words in regions (region_atomics.cpp) ----
  void mark_atomic(RegionState& rs, size_t first, size_t count);
  void mark_block_atomic(Lane& l, RegionState& rs, BlockMeta& m);
  void adopt_atomic(RegionState& rs, size_t b);
  void publish_release_clock(Lane& l, RegionState& rs, size_t b);
  uint64_t region_atomic_op(RegionState& rs, size_t b, size_t off, fabric::Opcode op, uint64_t a, uint64_t c, Order o);

  size_t notice_cap_bytes() const { return notice_wire_bytes(cfg.notices); }
};

}  // namespace loom::coherence
