#pragma once
// Offloader: the executor and completer threads of one process (seed 004), serving the command
// and tag queues of every offloaded Transmitter. A queue is handed to a thread when a requester
// (executor) or the executor (completer) turns its active bit from 0 to 1, and dropped when the
// thread finds it empty; a thread with no queue to watch spins briefly, then sleeps (dynamic
// offloading) or keeps spinning and yielding (static offloading).
//
// One executor and one completer per *way* rather than per queue pair as in the seed: a mesh
// keeps LOOM_QPS_PER_PEER queue pairs (ways) to each peer, and way w's Transmitters, one per
// peer, are served by worker pair w. With one way (the default) a process has one pair for all
// its Transmitters: a process has a Transmitter per peer and mesh, and this machine two cores.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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
  uint32_t worker = 0;  // the executor-completer pair that serves the channel
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
    // Executor-completer pairs (one per way of the meshes: LOOM_QPS_PER_PEER).
    uint32_t workers = 1;
  };
  explicit Offloader(Config cfg);
  ~Offloader();  // every channel must be gone (Transmitters destroyed) before this
  Offloader(const Offloader&) = delete;
  Offloader& operator=(const Offloader&) = delete;

  Mode mode() const { return cfg_.mode; }
  uint32_t commands() const { return cfg_.commands; }
  uint32_t workers() const { return cfg_.workers; }
  void activate_executor(ChannelNode& n) {
    Worker& w = *workers_[n.worker];
    w.exec_ready.push(&n);
    w.exec_sleep.wake();
  }
  void activate_completer(ChannelNode& n) {
    Worker& w = *workers_[n.worker];
    w.comp_ready.push(&n);
    w.comp_sleep.wake();
  }

  struct Usage {
    double executor_cpu_s = 0;
    double completer_cpu_s = 0;
    uint64_t executor_sleeps = 0, completer_sleeps = 0;
    uint64_t executor_wakes = 0, completer_wakes = 0;
    uint64_t yields = 0;  // rounds the threads gave their core away without work (both kinds)
  };
  // CPU time of the executors and of the completers so far, summed over the pairs (their thread
  // clocks, what getrusage(RUSAGE_THREAD) reports).
  Usage usage() const;

 private:
  struct Worker {
    explicit Worker(Wake wake) : exec_sleep(wake), comp_sleep(wake) {}
    ReadyList exec_ready;
    ReadyList comp_ready;
    Sleeper exec_sleep;
    Sleeper comp_sleep;
    std::thread executor;
    std::thread completer;
    std::atomic<uint64_t> yields{0};  // each thread adds its own (relaxed); read by usage()
  };
  template <typename Work, typename Idle>
  void serve(ReadyList& ready, Sleeper& sleeper, std::atomic<uint64_t>& yields, Work work, Idle try_idle);

  Config cfg_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace loom::signal::offload
