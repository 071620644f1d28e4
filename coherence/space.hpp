#pragma once
// The coherence protocol over shared regions (seed 003, MENPS): release consistency with
// multiple writers (twins and diffs), floating home, write notices with fast read from the last
// releaser, and logical leases; fixed home and directory invalidation as start-up alternatives.
// docs/coherence.md is the specification: states, messages, timestamp rules, hazards.
//
// A Space is the process's view of the distributed shared memory: it owns the regions (through
// dsm/region), the per-block state of this process's cache, the directory entries this process
// manages, and the synchronization objects (locks, barriers, atomic words) that are its acquire
// and release points. Threads of one process share its cache.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>

#include "loom/dsm/region/region.hpp"
#include "loom/dsm/region/write_tracking.hpp"
#include "loom/dsm/runtime/runtime.hpp"

namespace loom::coherence {

enum class HomePolicy : uint8_t { Floating, Fixed };
enum class Invalidation : uint8_t { Timestamp, Directory };

struct Policy {
  HomePolicy home = HomePolicy::Floating;
  Invalidation invalidation = Invalidation::Timestamp;
  // "floating-ts", "floating-dir", "fixed-ts", "fixed-dir"
  std::string name() const;
  static Policy parse(const std::string& name);
  bool operator==(const Policy&) const = default;
};

// When a releaser claims a block nobody shares (docs/coherence.md, "Exclusive blocks"): never;
// while few claims end in a downgrade; always (for tests).
enum class Claims : uint8_t { Off, Adaptive, Always };

struct Config {
  Policy policy;
  size_t reserve = size_t{16} << 30;  // address space for all regions
  uint32_t notices = 128;             // write-notice buffer capacity (entries)
  uint64_t lease = 16;                // logical lease length
  uint32_t sync_objects = 1024;       // locks + atomic words per Space
  Claims claims = Claims::Adaptive;   // exclusive blocks (docs/coherence.md)
  bool stats = false;                 // print the counters at the end (and watch for running siblings)
  bool fault_runs = true;             // a fault opens the run of blocks its interval touched last time
  bool refresh = true;                // an acquire refreshes copies open for plain reads in place
  // LOOM_COHERENCE_POLICY, LOOM_COHERENCE_RESERVE, LOOM_COHERENCE_NOTICES, LOOM_COHERENCE_LEASE, LOOM_COHERENCE_SYNC_OBJECTS,
  // LOOM_COHERENCE_EXCLUSIVE, LOOM_COHERENCE_STATS, LOOM_COHERENCE_FAULT_RUNS, LOOM_COHERENCE_REFRESH
  static Config from_env();
};

enum class Order : uint8_t { Relaxed, Acquire, Release, AcqRel };

struct Stats {
  uint64_t faults = 0;         // page faults handled (the transparent path)
  uint64_t read_misses = 0;    // fetches of a block's data
  uint64_t revalidations = 0;  // expired copies confirmed current without data
  uint64_t twins = 0;          // first writes
  uint64_t released_blocks = 0;
  uint64_t merged_releases = 0;  // releases that merged their diff over another's newer version
  uint64_t fetch_retries = 0;  // validations that failed (home moved, block being published)
  uint64_t invalidations = 0;
  uint64_t fast_reads = 0;     // fetches that went straight to the last releaser of a notice
  uint64_t exclusive_claims = 0;  // releases that kept a block writable in place (no one else holds it)
  uint64_t downgrades = 0;        // exclusive blocks this process gave up when another asked
  uint64_t downgrades_asked = 0;  // downgrades this process asked another for
  uint64_t notices = 0;           // write notices (entries, chunks included) applied by acquires
  uint64_t bytes_fetched = 0;     // block data read by the read path (misses and their retries)
  uint64_t races = 0;             // checking mode: merges that found bytes another process wrote too (reported)
  uint64_t run_blocks = 0;        // blocks a fault opened beside its own (fault runs: no fault of their own)
  uint64_t refreshes = 0;         // open copies an acquire fetched anew in place (no trap, no protection change)
  uint64_t intervals = 0;         // release fences (each ends an interval of this process)
  // The kernel's part (the whole process's regions, dsm/region/kernel_work.hpp): protection
  // changes, the pages they covered and their time; with LOOM_COHERENCE_STATS (or the OpenMP
  // layer's) those made while another thread of the process was running (a TLB shootdown).
  uint64_t protect_calls = 0, protect_pages = 0, protect_ns = 0, protect_sampled = 0, protect_beside_running = 0;
  // How writes to regions are tracked (loom-info also says what else the kernel offers).
  const char* write_tracking = region::kWriteTrackingInUse;
};

// The counters as one line of text (stats_line.cpp): LOOM_COHERENCE_STATS and LOOM_OMP_STATS print it.
std::string stats_line(const Stats& s);

class Space;

// What a synchronization object is: a slot of the Space's synchronization memory at its home
// process (slots are spread round-robin).
class SyncObject {
 public:
  int home() const { return home_; }

 protected:
  friend class Space;
  void bind(Space* s, uint32_t slot, int nprocs) {
    space_ = s;
    slot_ = slot;
    home_ = static_cast<int>(slot % static_cast<uint32_t>(nprocs));
  }
  Space* space_ = nullptr;
  uint32_t slot_ = 0;
  int home_ = 0;
};

// A queue lock (MCS) over fabric atomics; no lock server. lock() is an acquire, unlock() a
// release. Cheap to copy; made collectively by Space::make_lock.
class Lock : public SyncObject {
 public:
  void lock();
  // lock() if nobody holds or waits for the lock now (one CAS); false, and nothing held, if not
  // (this thread holding it included).
  bool try_lock();
  void unlock();

 private:
  bool take(bool try_only);
};

// A shared 8-byte word operated on with fabric atomics, with acquire/release options.
class AtomicWord : public SyncObject {
 public:
  uint64_t fetch_add(uint64_t v, Order o = Order::AcqRel);
  // Returns the old value; the swap happened iff it equals `expected`.
  uint64_t compare_swap(uint64_t expected, uint64_t desired, Order o = Order::AcqRel);
  uint64_t load(Order o = Order::Acquire);
  void store(uint64_t v, Order o = Order::Release);
};

// An 8-byte word inside a region's atomic blocks (Space::new_atomic_words), operated on with
// fabric atomics at its block's manager, with the orders of AtomicWord (docs/coherence.md,
// "Atomic words in regions"). Made by Space::atomic_ref without any collective; cheap to copy.
struct RegionState;

class AtomicRef {
 public:
  uint64_t fetch_add(uint64_t v, Order o = Order::AcqRel);
  // Returns the old value; the swap happened iff it equals `expected`.
  uint64_t compare_swap(uint64_t expected, uint64_t desired, Order o = Order::AcqRel);
  uint64_t load(Order o = Order::Acquire);
  void store(uint64_t v, Order o = Order::Release);

 private:
  friend class Space;
  RegionState& state() const;  // the region's protocol state, checked
  Space* space_ = nullptr;
  uint32_t region_ = 0;  // region id
  size_t block_ = 0;
  size_t offset_ = 0;    // byte offset of the word in its block
};

class Space final : public region::FaultSink {
 public:
  // Collective. Every collective call of the Space takes the call site (for the checking mode,
  // LOOM_CHECK: dsm/runtime/collectives.hpp); callers leave it to its default.
  explicit Space(Runtime& rt, Config cfg = Config::from_env(),
                 const std::source_location& where = std::source_location::current());
  ~Space() override;  // collective
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;
  static Space& current();

  // Collective: a region at the same address in every process; every block starts zero.
  region::Region& create_region(const region::RegionOptions& opt,
                                const std::source_location& where = std::source_location::current());
  region::Region& create_region(size_t size, size_t block_size = 4096, size_t local_bytes = SIZE_MAX,
                                const std::source_location& where = std::source_location::current()) {
    region::RegionOptions o;
    o.size = size;
    o.block_size = block_size;
    o.local_bytes = local_bytes;
    return create_region(o, where);
  }
  // Collective: a range the program already has (whole blocks, the same address and contents
  // in every process, checked; a global array, a data segment) shared where it is, its
  // contents the first version of every block. After destroy_region the range is this
  // process's private memory again, holding what this process last saw.
  region::Region& share_in_place(void* base, size_t size, size_t block_size = 4096,
                                 const std::source_location& where = std::source_location::current());
  // Collective: the same for a range of fresh memory, zeros in every process (mapped and never
  // written, e.g. by region::map_at_common_address): nothing is compared or copied, so a large
  // range costs no more than its blocks' bookkeeping.
  region::Region& share_fresh_in_place(void* base, size_t size, size_t block_size = 4096,
                                       const std::source_location& where = std::source_location::current());
  void destroy_region(region::Region& r, const std::source_location& where = std::source_location::current());

  Lock make_lock(const std::source_location& where = std::source_location::current());  // collective
  AtomicWord make_atomic(uint64_t initial = 0,
                         const std::source_location& where = std::source_location::current());  // collective

  // `count` zeroed words for AtomicRef, in whole blocks of their own: a plain load or store of
  // them is an error. Collective like Region::allocate, or (`local`) from this process's arena
  // alone. Atomic blocks stay atomic until the region is destroyed.
  uint64_t* new_atomic_words(region::Region& r, size_t count, bool local = false,
                             const std::source_location& where = std::source_location::current());
  // Any word of an atomic block, by any process (no collective: a process that did not make the
  // words learns their blocks from the directory on first use).
  AtomicRef atomic_ref(uint64_t* word);

  // Every thread (Runtime::threads_per_process()) of every process: a release, then an acquire
  // of everything released before it anywhere.
  // Not the process barrier (Runtime::barrier), nor the calls' (Invoker::barrier): see the
  // barrier table in docs/user-guide.md.
  void barrier(const std::source_location& where = std::source_location::current());
  // A release fence: this process's writes so far are published (and named by its notices).
  void release();
  // A full fence for threads that wait by polling memory rather than by a synchronization object
  // (OpenMP's `flush`): a release and an acquire through `word`, which carries the notices of
  // every fence to the next; under the timestamp policies the acquire also moves this process's
  // logical time on by one, so a copy polled fence after fence outlives its lease within
  // `lease` fences and is checked against its directory entry — a write published by any
  // release (a barrier's, a lock's, another fence's) reaches a thread that keeps fencing.
  void fence(AtomicWord& word);

  // Explicit access (no faults): declare a read or a write of [p, p+n) before making it.
  void declare_read(const void* p, size_t n);
  void declare_write(void* p, size_t n);
  // declare_write of bytes this thread overwrites whole before its next release: the blocks
  // inside [p, p+n) take no twin, and the release publishes them whole (no diff), whatever
  // another process published meanwhile. Bytes left unwritten publish what they held.
  void declare_overwrite(void* p, size_t n);
  // declare_read, and the address of the same bytes in the runtime's view of the region, which
  // never faults and costs no page-table change: valid for reading [p, p+n) until this thread's
  // next acquire (barrier, lock, acquiring atomic), after which it may show stale bytes.
  const void* declare_read_view(const void* p, size_t n);
  template <typename T>
  const T* reading(const T* p, size_t n = 1) {
    return static_cast<const T*>(declare_read_view(p, n * sizeof(T)));
  }
  template <typename T>
  T* writing(T* p, size_t n = 1) {
    declare_write(p, n * sizeof(T));
    return p;
  }
  template <typename T>
  T* overwriting(T* p, size_t n = 1) {
    declare_overwrite(p, n * sizeof(T));
    return p;
  }

  const Config& config() const { return cfg_; }
  const Policy& policy() const { return cfg_.policy; }
  Runtime& runtime() { return rt_; }
  Stats stats() const;
  region::AddressSpace& address_space();

  void on_fault(region::Region& r, size_t block, region::Access access) override;

  // Fault injection for tests (as eRPC's fault_inject_*): this process's service thread pauses
  // this long in every downgrade it serves, after the directory entry says the block is shared
  // and before the downgrade's bookkeeping ends. 0 (the default) turns it off.
  void fault_inject_downgrade_pause(std::chrono::microseconds pause);

 private:
  friend class Lock;
  friend class AtomicWord;
  friend class AtomicRef;
  struct Impl;  // coherence/space_impl.hpp
  Runtime& rt_;
  Config cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::coherence
