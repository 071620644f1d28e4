#pragma once
// The remote invocation subsystem (seed 000 §4.4): the Invoker is the process-level runtime —
// the mesh of Transmitters, one Inbox per destination thread, each sender thread's Messengers,
// helper threads, and the service handlers that hand out chunks. The pieces: config.hpp,
// synchronizer.hpp, frame_spec.hpp, messenger.hpp, inbox.hpp. The primitives (call,
// call_buffer, call_return, broadcast) are in invoke/calls.hpp; the Aggregator in
// invoke/aggregator.hpp; docs/invocation.md is the user guide and the wire protocol.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/stall.hpp"
#include "loom/invoke/call_barrier.hpp"
#include "loom/invoke/config.hpp"
#include "loom/invoke/doorbell.hpp"
#include "loom/invoke/frame_spec.hpp"
#include "loom/invoke/inbox.hpp"
#include "loom/invoke/messenger.hpp"
#include "loom/invoke/synchronizer.hpp"

namespace loom::invoke {

// The process-level invocation runtime. Collective construction and destruction.
class Invoker {
 public:
  static constexpr size_t kInlineLimit = 64;  // QpCaps::max_inline of the invocation mesh

  explicit Invoker(Runtime& rt, Config cfg = Config::from_env(),
                   const std::source_location& where = std::source_location::current());
  ~Invoker();
  Invoker(const Invoker&) = delete;
  Invoker& operator=(const Invoker&) = delete;

  static Invoker& current();

  Runtime& runtime() { return rt_; }
  const Config& config() const { return cfg_; }
  int threads() const { return threads_; }
  int total_threads() const { return threads_ * ranks_; }
  int gid(Thread t) const { return t.rank * threads_ + t.index; }
  Thread thread_of(int gid) const { return Thread{gid / threads_, gid % threads_}; }
  // The calling thread as a destination: a worker thread's own index; on a helper, the worker
  // thread whose calls it is running (a helper outside a call is no destination: an error).
  Thread self() const;
  void check(Thread t) const {
    if (static_cast<unsigned>(t.rank) >= static_cast<unsigned>(ranks_) ||
        static_cast<unsigned>(t.index) >= static_cast<unsigned>(threads_))
      check_failed(t);
  }

  // Runs the calls addressed to this thread (or to thread `index`, from a helper). Calls this
  // thread queued for a full ring stay queued: a loop that makes calls inside calls waits with
  // progress().
  int poll();
  int poll(int index);
  // Flushes this thread's open records, finishes its queued async calls where possible, runs
  // its incoming calls.
  int progress();
  // Whether calls wait for this thread in its inbox (what progress() would run); false on a
  // thread that has no inbox.
  bool has_incoming();
  // Waits (running this thread's calls) until pred() holds.
  template <typename Pred>
  void wait_until(Pred pred) {
    wait::Backoff b = idle_backoff();
    wait::StallWatch stall;
    while (!pred()) {
      if (progress() > 0) {
        b = idle_backoff();
        stall.reset();
      } else {
        this->idle(b, pred);
        if (b.should_sleep()) rt_.peers().check_all("invoke: a wait for calls or results");
        stall.check([this] { return stall_report(); });
      }
    }
  }
  // One round of a wait with nothing to do: spins first; then a worker thread sleeps on its
  // doorbell until something arrives for it or `ready()` may hold (invoke/doorbell.hpp), others
  // take the timed back-off. A thread some of whose peers ring it across the network (a wake
  // costs a READ, a SEND and two thread wake-ups) polls with the plain back-off's spins, yields
  // and shorter timed sleeps first, and sleeps on its doorbell once those grew to their longest.
  // A thread whose checks of bells out of reach are in flight (invoke/bell_checks.hpp) does not
  // sleep before they are answered: the thread they may wake waits for them.
  template <typename Ready>
  void idle(wait::Backoff& b, Ready&& ready) {
    if (b.should_sleep() && checks_in_flight()) return b.spin_or_yield();
    const int me = sleeper_index();
    if (me < 0 || !(rung_across_ ? b.sleeps_longest() : b.should_sleep())) return b.pause();
    bells_->sleep(me, [&] { return ready() || inboxes_[static_cast<size_t>(me)]->has_incoming(); });
  }
  // The back-off of a wait that runs this thread's calls. Where it sleeps on its doorbell it
  // spins for ~20 us first (a futex wake costs the waker a system call: a receiver keeping up
  // with a stream of one-sided calls must not make every call pay it) and never yields (a yield
  // beside a busy process hands it the core for a whole time slice) — unless its calls came by
  // SEND lately: those need this process's service thread, which a spinning thread keeps from
  // the core, so it spins briefly and yields as the plain back-off does before it sleeps on its
  // doorbell. Elsewhere the plain back-off.
  wait::Backoff idle_backoff() const {
    const int me = sleeper_index();
    if (me < 0 || rung_across_) return wait::Backoff();
    if (inboxes_[static_cast<size_t>(me)]->took_sends_lately()) return wait::Backoff(wait::Backoff::kYields);
    return wait::Backoff(0, spin_rounds_);
  }
  Doorbells& bells() { return *bells_; }
  // Collective over every worker thread of every process: returns once every call made anywhere
  // before its callers arrived (and every call those made) has run; runs this thread's calls
  // while it waits (docs/invocation.md, "Barriers"). Flush an Ovfl Aggregator (drain) first.
  void barrier(const std::source_location& where = std::source_location::current()) { call_barrier_->arrive(where); }
  // Calls this process's threads made, and calls its inboxes ran (the barrier's counts).
  CallBarrier::Counts call_counts();

  // One line per channel of this process: for a stalled wait, and for debugging.
  std::string describe();

  // This thread's (a thread-local pointer, checked against this Invoker's serial).
  MessengerGlobal& messengers() {
    if (t_global_.serial == serial_) return *t_global_.global;
    return messengers_slow();
  }
  void flush();                    // this thread's open records

  signal::Transmitter& tx(int rank) { return mesh_->tx(rank); }
  Inbox& inbox(int index) { return *inboxes_.at(static_cast<size_t>(index)); }
  memory::RegisteredHeap& heap() { return rt_.heap(); }

  // Receiver-side errors (unknown function ids, malformed calls): an Error from the poll that
  // met them (BadCalls::Fail, the default), or counted, reported and survived (Report).
  uint64_t bad_calls() const { return bad_calls_.load(std::memory_order_relaxed); }
  std::string last_error() const;
  void report(const std::string& what);

  // Internal: messengers with queued RetryAsync calls, for the helpers.
  void note_async(Messenger* m);
  uint64_t next_messenger_serial() { return next_serial_.fetch_add(1, std::memory_order_relaxed); }
  uint32_t chunks_function() const { return chunks_fn_; }
  uint32_t send_function() const { return send_fn_; }

 private:
  [[noreturn]] void check_failed(Thread t) const;
  bool is_helper() const;  // a helper thread, not running calls just now
  bool checks_in_flight() {
    MessengerGlobal& m = messengers();
    return m.checking() && m.bell_checks().poll();
  }
  // This thread's index if it is a worker thread whose doorbell can be rung here (-1 otherwise:
  // helpers, the service thread, other threads, bells out of the peers' reach).
  int sleeper_index() const;
  static uint32_t spin_rounds_for(std::chrono::nanoseconds d);
  MessengerGlobal& messengers_slow();
  struct TlsGlobal {
    uint64_t serial;
    MessengerGlobal* global;
  };
  static inline thread_local TlsGlobal t_global_{0, nullptr};
  std::string stall_report();
  void helper_loop(int which);
  void flush_everything();
  void report_unrun();
  void drain_async_all();

  Runtime& rt_;
  Config cfg_;
  int ranks_;
  int threads_;
  uint64_t serial_;
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<CallBarrier> call_barrier_;
  std::unique_ptr<Doorbells> bells_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  // Every thread's Messengers (messengers_slow); a thread keeps its own in t_global_. globals_mu_
  // is held over their flushes only at teardown (flush_everything), when their threads are done;
  // async_mu_ and err_mu_ are leaves (nothing is locked under them).
  std::mutex globals_mu_;
  std::vector<std::unique_ptr<MessengerGlobal>> globals_;
  std::atomic<uint64_t> next_serial_{1};
  // Messengers with asynchronous calls in flight (note_async, drain_async_all).
  std::mutex async_mu_;
  std::vector<Messenger*> async_;
  std::atomic<uint64_t> async_n_{0};  // async_.size(), stored release: flush_everything's acquire load
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
  // Calls refused by the checks and the last reason (report, last_error).
  std::atomic<uint64_t> bad_calls_{0};
  mutable std::mutex err_mu_;
  std::string last_error_;
  uint32_t chunks_fn_ = 0;
  uint32_t send_fn_ = 0;
  bool bells_usable_ = false;  // every process's doorbells can be rung from here (mapped, or by checks)
  bool rung_across_ = false;   // some by checks (invoke/bell_checks.hpp)
  uint32_t spin_rounds_ = wait::Backoff::kSpins;  // cpu_relax rounds in ~20 us, measured at start
};

inline Messenger& MessengerGlobal::to(Thread dest) {
  inv_.check(dest);
  size_t g = static_cast<size_t>(inv_.gid(dest));
  if (g < messengers_.size() && messengers_[g]) return *messengers_[g];
  return create(dest);
}

}  // namespace loom::invoke
