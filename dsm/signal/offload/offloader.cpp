#include "loom/dsm/signal/offload/offloader.hpp"

#include <pthread.h>
#include <time.h>

#include <vector>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/signal/offload/channel.hpp"
#include "loom/dsm/signal/transmitter.hpp"

namespace loom::signal::offload {

const char* to_string(Mode m) {
  switch (m) {
    case Mode::Direct: return "direct";
    case Mode::Static: return "static";
    case Mode::Dynamic: return "dynamic";
  }
  return "?";
}

Mode parse_mode(const std::string& s) {
  if (s == "direct") return Mode::Direct;
  if (s == "static") return Mode::Static;
  if (s == "dynamic") return Mode::Dynamic;
  fail("offload: unknown mode '", s, "' (direct, static or dynamic)");
}

Wake parse_wake(const std::string& s) {
  if (s == "futex") return Wake::Futex;
  if (s == "condvar") return Wake::CondVar;
  fail("offload: unknown wake method '", s, "' (futex or condvar)");
}

Offloader::Offloader(Config cfg) : cfg_(cfg) {
  if (cfg.mode == Mode::Direct) fail("offload: an Offloader serves static or dynamic offloading, not direct injection");
  if (cfg.commands < 64 || (cfg.commands & (cfg.commands - 1)) != 0)
    fail("offload: a command queue of ", cfg.commands, " entries (need a power of two, at least 64)");
  if (cfg.workers < 1 || cfg.workers > 16) fail("offload: ", cfg.workers, " executor-completer pairs (need 1..16)");
  for (uint32_t i = 0; i < cfg.workers; ++i) {
    workers_.push_back(std::make_unique<Worker>(cfg.wake));
    Worker& w = *workers_.back();
    w.executor = std::thread([this, &w] {
      Transmitter::prepare_this_thread();
      serve(w.exec_ready, w.exec_sleep, w.yields, [](Channel& c) { return c.execute(32); },
            [](Channel& c) { return c.executor_try_idle(); });
    });
    w.completer = std::thread([this, &w] {
      serve(w.comp_ready, w.comp_sleep, w.yields, [](Channel& c) { return c.complete(); },
            [](Channel& c) { return c.completer_try_idle(); });
    });
  }
}

Offloader::~Offloader() {
  stop_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) {
    w->exec_sleep.wake();
    w->comp_sleep.wake();
  }
  for (auto& w : workers_) {
    w->executor.join();
    w->completer.join();
  }
}

// One offload thread's loop: take the queues handed over, give each a turn, drop those found
// idle; with none left, spin, then (dynamic) sleep until a queue is handed over.
template <typename Work, typename Idle>
void Offloader::serve(ReadyList& ready, Sleeper& sleeper, std::atomic<uint64_t>& yields, Work work, Idle try_idle) {
  constexpr int kSpinRounds = 64;
  std::vector<Channel*> active;
  uint32_t idle = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    while (ReadyNode* n = ready.pop()) active.push_back(static_cast<ChannelNode*>(n)->channel);
    bool worked = false;
    for (size_t i = 0; i < active.size();) {
      if (work(*active[i]) > 0) {
        worked = true;
      } else if (try_idle(*active[i])) {
        active[i] = active.back();
        active.pop_back();
        continue;
      }
      ++i;
    }
    if (worked) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < kSpinRounds) {
      wait::cpu_relax();
    } else if (!active.empty() || cfg_.mode == Mode::Static || idle < cfg_.idle_rounds) {
      // Queues watched but waiting (a command being placed, a completion on the wire), or
      // static offloading: keep the core offered to others.
      std::this_thread::yield();
      yields.fetch_add(1, std::memory_order_relaxed);
    } else {
      // Sleeps until a queue is handed over; the timeout is a safety net only. `idle` stays where it
      // is: a thread that wakes to nothing sleeps again at once rather than spinning and yielding
      // its whole budget once a second (which kept an idle pair at about 1% of a core).
      sleeper.sleep([&] { return !ready.empty() || stop_.load(std::memory_order_seq_cst); }, std::chrono::seconds(1));
    }
  }
}

namespace {
// native_handle() is not const; the handle is only read.
double thread_cpu_seconds(const std::thread& t) {
  clockid_t id;
  timespec ts{};
  if (pthread_getcpuclockid(const_cast<std::thread&>(t).native_handle(), &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

Offloader::Usage Offloader::usage() const {
  Usage u;
  for (const auto& w : workers_) {
    u.executor_cpu_s += thread_cpu_seconds(w->executor);
    u.completer_cpu_s += thread_cpu_seconds(w->completer);
    u.executor_sleeps += w->exec_sleep.sleeps();
    u.completer_sleeps += w->comp_sleep.sleeps();
    u.executor_wakes += w->exec_sleep.wakes();
    u.completer_wakes += w->comp_sleep.wakes();
    u.yields += w->yields.load(std::memory_order_relaxed);
  }
  return u;
}

}  // namespace loom::signal::offload
