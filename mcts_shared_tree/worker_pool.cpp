#include "loom/mcts_shared_tree/worker_pool.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "loom/dsm/common/backoff.hpp"

namespace loom::mcts {

namespace {

// Spins, yields, then sleeps on the futex of `word` until it differs from `seen` (a waker
// calls notify after changing it).
template <typename T>
T wait_for_change(const std::atomic<T>& word, T seen) {
  wait::Backoff backoff;
  for (;;) {
    const T now = word.load(std::memory_order_acquire);
    if (now != seen) return now;
    if (backoff.should_sleep()) word.wait(seen, std::memory_order_acquire);
    else backoff.spin_or_yield();
  }
}

uint64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

// job(index), its CPU time added to `cpu_ns`.
void timed(const std::function<void(int)>& job, int index, std::atomic<uint64_t>& cpu_ns) {
  const uint64_t t0 = thread_cpu_ns();
  job(index);
  cpu_ns.fetch_add(thread_cpu_ns() - t0, std::memory_order_relaxed);
}

}  // namespace

void run_on_any_core() {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &all);
  sched_setaffinity(0, sizeof all, &all);  // best effort: a refusal leaves the inherited set
}

WorkerPool::Spawn WorkerPool::any_core() {
  return [](int, std::function<void()> body) {
    return std::thread([body = std::move(body)] {
      run_on_any_core();
      body();
    });
  };
}

WorkerPool::WorkerPool(int workers, Spawn spawn) {
  for (int w = 1; w < workers; ++w) threads_.push_back(spawn(w, [this, w] { serve(w); }));
}

WorkerPool::~WorkerPool() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_release);  // pairs with serve's acquiring wait
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::run(const std::function<void(int)>& job) {
  job_ = &job;
  pending_.store(static_cast<int>(threads_.size()), std::memory_order_relaxed);
  cpu_ns_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // job_, pending_ and cpu_ns_ before the workers see the run
  generation_.notify_all();
  timed(job, 0, cpu_ns_);
  // Each worker's job happened before its releasing decrement; the acquiring loads here pair
  // with them, so the workers' results are visible when run returns.
  for (int left = pending_.load(std::memory_order_acquire); left != 0;) left = wait_for_change(pending_, left);
}

void WorkerPool::serve(int index) {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_change(generation_, seen);
    if (stop_) return;
    timed(*job_, index, cpu_ns_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    pending_.notify_one();  // the caller sleeps on every value, not only the last
  }
}

}  // namespace loom::mcts
