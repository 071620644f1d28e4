#pragma once
// What the regions ask of the kernel, counted per process: protection changes (mprotect calls,
// the pages they cover, the time they take) and, when asked for, how many of them were made
// while another thread of the process was running on a CPU — the changes that cost a TLB
// shootdown interrupt to that CPU (docs/coherence.md, "What the kernel costs").
#include <atomic>
#include <cstdint>

namespace loom::region {

struct KernelWork {
  uint64_t protect_calls = 0;    // mprotect calls by Region::protect
  uint64_t protect_pages = 0;    // the pages those calls covered
  uint64_t protect_ns = 0;       // time spent in them
  uint64_t protect_sampled = 0;  // calls checked for running siblings (0 unless watched)
  uint64_t protect_beside_running = 0;  // ... of which another thread of the process was running
};

// The process's counters so far.
KernelWork kernel_work();
// Check, at every protection change, whether another thread of the process is running (reads
// /proc/self/task: tens of microseconds a call, so only where counters are printed:
// LOOM_COHERENCE_STATS, LOOM_OMP_STATS, the benchmarks).
void watch_running_siblings(bool on);
// Region::protect's accounting (kernel_work.cpp).
void count_protect(uint64_t pages, uint64_t ns);
// Threads of this process other than the caller that are running now (state R), by /proc.
int running_siblings();

}  // namespace loom::region
