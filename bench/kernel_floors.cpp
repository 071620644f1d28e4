#include "bench/kernel_floors.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace loom::bench {
namespace {

using clk = std::chrono::steady_clock;

double us_since(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

uint8_t* g_floor_pages = nullptr;
void floor_handler(int, siginfo_t* si, void*) {
  auto* p = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(si->si_addr) & ~uintptr_t{4095});
  mprotect(p, 4096, PROT_READ | PROT_WRITE);
}

// Resident pages in one mapping, every other one readable so the pages are separate areas, as
// the blocks of a region are.
uint8_t* map_pages(int pages) {
  auto* p = static_cast<uint8_t*>(mmap(nullptr, static_cast<size_t>(pages) * 4096, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
  if (p == MAP_FAILED) return nullptr;
  mprotect(p, static_cast<size_t>(pages) * 4096, PROT_NONE);
  for (int i = 0; i < pages; i += 2) mprotect(p + static_cast<size_t>(i) * 4096, 4096, PROT_READ);
  return p;
}

// Median over 5 rounds of `changes` protection changes, each of one page of 1024.
double protect_us(int changes) {
  constexpr int kPages = 1024;
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    uint8_t* p = map_pages(kPages);
    if (p == nullptr) return 0;
    const auto t0 = clk::now();
    for (int i = 0; i < changes; ++i)
      mprotect(p + static_cast<size_t>(i % kPages) * 4096, 4096, (i / kPages) % 2 == 0 ? PROT_READ | PROT_WRITE : PROT_NONE);
    t.push_back(us_since(t0) / changes);
    munmap(p, static_cast<size_t>(kPages) * 4096);
  }
  return median_of(t);
}

// protect_us in a child of one thread; its figure comes back through a pipe.
double protect_us_alone(int changes) {
  int fd[2];
  if (pipe(fd) != 0) return 0;
  const pid_t pid = fork();
  if (pid == 0) {
    const double us = protect_us(changes);
    (void)!write(fd[1], &us, sizeof us);
    _exit(0);
  }
  close(fd[1]);
  double us = 0;
  if (pid < 0 || read(fd[0], &us, sizeof us) != sizeof us) us = 0;
  close(fd[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return us;
}

}  // namespace

double page_fault_floor_us(int pages) {
  struct sigaction sa {}, old {};
  sa.sa_sigaction = floor_handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old);
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    g_floor_pages = map_pages(pages);
    if (g_floor_pages == nullptr) break;
    const auto t0 = clk::now();
    for (int i = 0; i < pages; ++i) g_floor_pages[static_cast<size_t>(i) * 4096] = 1;
    t.push_back(us_since(t0) / pages);
    munmap(g_floor_pages, static_cast<size_t>(pages) * 4096);
  }
  sigaction(SIGSEGV, &old, nullptr);
  return median_of(t);
}

ProtectFloors protect_floors_us(int changes) {
  ProtectFloors f;
  f.bare = protect_us_alone(changes);
  f.in_process = protect_us(changes);
  std::atomic<bool> stop{false}, started{false};
  std::thread spinner([&] {
    started.store(true);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  while (!started.load()) std::this_thread::yield();
  f.sibling_running = protect_us(changes);
  stop.store(true);
  spinner.join();
  return f;
}

}  // namespace loom::bench
