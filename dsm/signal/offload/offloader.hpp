#pragma once
// Offloader: the executor and completer threads of one process (seed 004), serving the command
// and tag queues of every offloaded Transmitter. A queue is handed to a thread when a requester
// (executor) or the executor (completer) turns its active bit from 0 to 1, and dropped when the
// thread finds it empty; a thread with no queue to watch spins briefly, then sleeps (dynamic
// offloading) or keeps spinning and yielding (static offloading).
//
// One executor and one completer per process rather than one per queue pair as in the seed:
// a process has a Transmitter per peer and mesh, and this machine two cores.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "loom/dsm/signal/offload/ready_list.hpp"
#include "loom/dsm/signal/offload/sleeper.hpp"

namespace loom::signal::offload {

enum class Mode : uint8_t { Direct, Static, Dynamic };
const char* to_string(Mode m);
Mode parse_mode(const std::string& s);  // "direct" | "static" | "dynamic"; a clear error otherwise
Wake parse_wake(const std::string& s);  // "futex" | "condvar"

class Channel;
struct ChannelNode : ReadyNode {
  Channel* channel = nullptr;
};

class Offloader {
 public:
  struct Config {
    Mode mode = Mode::Dynamic;
    Wake wake = Wake::Futex;
    // Rounds without work a thread spins (and yields) before it sleeps, dynamic mode.
    uint32_t idle_rounds = 2000;
    // Commands a Transmitter's queue holds (a power of two, at least twice the send queue's
    // depth): requesters wait for a free slot only with this many requests not yet posted.
    uint32_t commands = 4096;
  };
  explicit Offloader(Config cfg);
  ~Offloader();  // every channel must be gone (Transmitters destroyed) before this
  Offloader(const Offloader&) = delete;
  Offloader& operator=(const Offloader&) = delete;

  Mode mode() const { return cfg_.mode; }
  uint32_t commands() const { return cfg_.commands; }
  void activate_executor(ChannelNode& n) {
    exec_ready_.push(&n);
    exec_sleep_.wake();
  }
  void activate_completer(ChannelNode& n) {
    comp_ready_.push(&n);
    comp_sleep_.wake();
  }

  struct Usage {
    double executor_cpu_s = 0;
    double completer_cpu_s = 0;
    uint64_t executor_sleeps = 0, completer_sleeps = 0;
    uint64_t executor_wakes = 0, completer_wakes = 0;
  };
  // CPU time of the two threads so far (their thread clocks, what getrusage(RUSAGE_THREAD) reports).
  Usage usage() const;

 private:
  void run_executor();
  void run_completer();
  template <typename Work, typename Idle>
  void serve(ReadyList& ready, Sleeper& sleeper, Work work, Idle try_idle);

  Config cfg_;
  ReadyList exec_ready_;
  ReadyList comp_ready_;
  Sleeper exec_sleep_;
  Sleeper comp_sleep_;
  std::atomic<bool> stop_{false};
  std::thread executor_;
  std::thread completer_;
};

}  // namespace loom::signal::offload
