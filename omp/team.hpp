#pragma once
// The OpenMP team across processes. Every process contributes the runtime's threads per process
// (loomrun --threads T); the team is P x T threads, numbered rank x T + the thread's index, and
// rank 0's thread 0 is the program's master. A parallel region is a descriptor the master writes
// into a shared region and two Space barriers around the outlined function (fork and join).
// Worksharing takes its shared state from atomic words made with the team: the k-th construct
// every thread meets uses word k mod kWords, tagged with k / kWords, so no construct needs a
// collective set-up; locks serve `critical`.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "loom/coherence/space.hpp"
#include "loom/omp/named_locks.hpp"
#include "loom/omp/schedule.hpp"

namespace loom::omp {

using Outlined = void (*)(void*);

// A worksharing loop: n iterations, iteration i being start + i * step (64-bit patterns, so
// signed and unsigned loops of either direction use the same arithmetic), and its schedule.
struct LoopSpec {
  uint64_t n = 0;
  ScheduleKind kind = ScheduleKind::Static;
  uint64_t chunk = 0;
  uint64_t start = 0, step = 1;
  uint64_t value(uint64_t i) const { return start + i * step; }
};

class Team {
 public:
  static constexpr size_t kWords = 256;       // worksharing constructs in flight without a barrier
  static constexpr size_t kAtomicLocks = 16;  // the program's inline atomics hash onto these (by 64-byte line)

  // Collective, by one thread of each process (its main thread): makes the team's shared state
  // and starts this process's other threads, which wait for regions. Every process must run
  // the same program at the same addresses (loomrun --same-layout; checked).
  explicit Team(coherence::Space& space);
  // Collective: on rank 0 it ends the team (the others' serve() returns); joins the threads.
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  // Rank 0's master: fn(data) on every thread of the team, this one as thread 0; returns after
  // the join. `data` must be readable by every process (in a shared region). A team of another
  // size than size() is refused: every thread of every process takes part in the barriers.
  // With `loop`, every thread has started that loop before fn runs (a combined parallel loop).
  void parallel(Outlined fn, void* data, unsigned requested = 0, const LoopSpec* loop = nullptr);
  // A region inside a region: fn(data) on the calling thread alone, as a team of one (that has
  // started `loop` first, when given).
  static void run_serialized(Outlined fn, void* data, const LoopSpec* loop = nullptr);
  // Every process but rank 0, main thread: serves regions until the team ends.
  void serve();

  int size() const { return size_; }
  // Rank 0: a region runs (from its fork until the master has passed its join). The other
  // ranks' threads run the program's code only in regions.
  bool region_active() const { return region_active_.load(std::memory_order_acquire); }
  // The calling thread's team and number in the current region (nullptr and 0 outside one).
  static Team* current();
  static int thread_num();

  // ---- worksharing: called by every thread of the calling thread's team in the same order;
  // outside a region (or in a serialized one) the calling thread is a team of one ----
  static void barrier();
  // True for the first thread to reach this `single`.
  static bool single_start();
  // Starts a loop (dynamic and guided chunks come from one shared counter), then hands out its
  // chunks; nullopt when none is left.
  static void loop_start(const LoopSpec& loop);
  static std::optional<IterRange> loop_next();
  static const LoopSpec& current_loop();
  // A loop with `ordered` sections: its chunks take turns, in the order of their iterations.
  // ordered_start waits for the turn of the calling thread's chunk (the chunks before it have
  // ended: their sections ran, and their writes are released to it); the chunk hands the turn on
  // when it ends (at the next loop_next), whether or not a section ran in it.
  static void loop_start_ordered(const LoopSpec& loop);
  static void ordered_start();
  // Critical sections exclude every thread of the job, inside a region or not: the unnamed one,
  // and one per name (an OpenMP lock variable is one too).
  void critical_start(const void* name = nullptr);
  bool critical_try(const void* name);  // critical_start if nobody holds or waits for it now
  void critical_end(const void* name = nullptr);
  // An inline atomic on shared memory (inline_atomics.hpp) holds the lock of its 64-byte line:
  // locks of their own, so an atomic inside a critical section never waits for itself.
  void atomic_start(uintptr_t address);
  void atomic_end(uintptr_t address);
  // `omp flush` across processes: Space::fence through one atomic word of the team, which
  // carries the write notices of every flush to the next (docs/openmp.md).
  void flush();

 private:
  struct Descriptor;
  struct ThreadState;
  static ThreadState& state();
  void run_regions(int index);
  void run_region(int index);
  bool take_single(uint64_t construct);
  std::optional<IterRange> take_chunk(const LoopSpec& loop, uint64_t construct);
  void wait_turn(ThreadState& s);
  void hand_on_turn(ThreadState& s);
  coherence::AtomicRef word_for(uint64_t construct, uint64_t& tag);
  [[noreturn]] static void fail_ahead();
  coherence::Lock& lock_for(const void* name);

  coherence::Space& space_;
  int rank_ = 0, per_process_ = 1, size_ = 1;
  std::atomic<bool> region_active_{false};  // written by rank 0's master
  region::Region* control_ = nullptr;
  Descriptor* desc_ = nullptr;
  uint64_t* words_ = nullptr;  // kWords atomic words in control_
  coherence::Lock unnamed_;
  std::unique_ptr<NamedLocks> named_;
  std::vector<coherence::Lock> atomic_;
  coherence::AtomicWord flush_word_;
  std::vector<std::thread> threads_;
};

}  // namespace loom::omp
