#pragma once
// A search's worker threads, kept from search to search (docs/mcts.md, "Search"). A thread made
// for each search cost the first milliseconds of it: the new thread starts on its maker's core
// and waits there for the scheduler to move it (bench/README.md, "Measurements behind
// constants in the code"). Between searches the workers sleep on a futex the next search wakes.
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace loom::mcts {

// A thread inherits the affinity of the thread that made it; the runtime pins a process's main
// thread to one core when the cores suffice, so a worker a search adds would share that core
// with it. Workers after the first may run on any online core instead (best effort).
void run_on_any_core();

class WorkerPool {
 public:
  // Makes the thread of worker `index` (1, 2, ...) that runs `body`: std::thread, or the
  // runtime's spawn_at for workers that call other processes.
  using Spawn = std::function<std::thread(int index, std::function<void()> body)>;
  // Plain threads that may run on any online core (run_on_any_core).
  static Spawn any_core();

  // `workers` in all, the caller being worker 0 (no thread for it).
  WorkerPool(int workers, Spawn spawn);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()) + 1; }
  // Runs job(w) on every worker w (job(0) on the caller) and returns when all have returned.
  // One run at a time, from one thread.
  void run(const std::function<void(int)>& job);
  // The CPU time the workers spent in the last run's jobs, summed over them (nanoseconds).
  uint64_t last_run_cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }

 private:
  void serve(int index);

  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;  // written before generation_ moves (release)
  std::atomic<uint64_t> generation_{0};             // a run starts: workers wake on it
  std::atomic<int> pending_{0};                     // workers still in this run's job
  std::atomic<uint64_t> cpu_ns_{0};                 // added to before each worker's releasing decrement of pending_
  bool stop_ = false;                               // written before the last generation_ move
};

}  // namespace loom::mcts
