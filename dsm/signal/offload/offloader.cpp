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

Offloader::Offloader(Config cfg) : cfg_(cfg), exec_sleep_(cfg.wake), comp_sleep_(cfg.wake) {
  if (cfg.mode == Mode::Direct) fail("offload: an Offloader serves static or dynamic offloading, not direct injection");
  if (cfg.commands < 64 || (cfg.commands & (cfg.commands - 1)) != 0)
    fail("offload: a command queue of ", cfg.commands, " entries (need a power of two, at least 64)");
  executor_ = std::thread([this] {
    Transmitter::prepare_this_thread();
    run_executor();
  });
  completer_ = std::thread([this] { run_completer(); });
}

Offloader::~Offloader() {
  stop_.store(true, std::memory_order_seq_cst);
  exec_sleep_.wake();
  comp_sleep_.wake();
  executor_.join();
  completer_.join();
}

// One offload thread's loop: take the queues handed over, give each a turn, drop those found
// idle; with none left, spin, then (dynamic) sleep until a queue is handed over.
template <typename Work, typename Idle>
void Offloader::serve(ReadyList& ready, Sleeper& sleeper, Work work, Idle try_idle) {
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
    } else {
      sleeper.sleep([&] { return !ready.empty() || stop_.load(std::memory_order_seq_cst); }, std::chrono::seconds(1));
      idle = 0;
    }
  }
}

void Offloader::run_executor() {
  serve(exec_ready_, exec_sleep_, [](Channel& c) { return c.execute(32); }, [](Channel& c) { return c.executor_try_idle(); });
}

void Offloader::run_completer() {
  serve(comp_ready_, comp_sleep_, [](Channel& c) { return c.complete(); }, [](Channel& c) { return c.completer_try_idle(); });
}

namespace {
double thread_cpu_seconds(std::thread& t) {
  clockid_t id;
  timespec ts{};
  if (pthread_getcpuclockid(t.native_handle(), &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

Offloader::Usage Offloader::usage() const {
  Usage u;
  auto* self = const_cast<Offloader*>(this);  // native_handle() is not const; the handle is only read
  u.executor_cpu_s = thread_cpu_seconds(self->executor_);
  u.completer_cpu_s = thread_cpu_seconds(self->completer_);
  u.executor_sleeps = exec_sleep_.sleeps();
  u.completer_sleeps = comp_sleep_.sleeps();
  u.executor_wakes = exec_sleep_.wakes();
  u.completer_wakes = comp_sleep_.wakes();
  return u;
}

}  // namespace loom::signal::offload
