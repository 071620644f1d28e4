#include "loom/dsm/region/kernel_work.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace loom::region {
namespace {

struct Counters {
  std::atomic<uint64_t> calls{0}, pages{0}, ns{0}, sampled{0}, beside_running{0};
  std::atomic<bool> watch{false};
};
Counters& counters() {
  static Counters c;
  return c;
}

// A thread's state letter from /proc/self/task/<tid>/stat: the first field after the command
// name's closing parenthesis (the name may hold spaces and parentheses).
char task_state(const char* tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return '?';
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return '?';
  buf[n] = 0;
  const char* close_paren = std::strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

}  // namespace

int running_siblings() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  const long self = syscall(SYS_gettid);
  int running = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || std::atol(e->d_name) == self) continue;
    if (task_state(e->d_name) == 'R') ++running;
  }
  closedir(d);
  return running;
}

void watch_running_siblings(bool on) { counters().watch.store(on, std::memory_order_relaxed); }

void count_protect(uint64_t pages, uint64_t ns) {
  Counters& c = counters();
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.pages.fetch_add(pages, std::memory_order_relaxed);
  c.ns.fetch_add(ns, std::memory_order_relaxed);
  if (c.watch.load(std::memory_order_relaxed)) {
    c.sampled.fetch_add(1, std::memory_order_relaxed);
    if (running_siblings() > 0) c.beside_running.fetch_add(1, std::memory_order_relaxed);
  }
}

KernelWork kernel_work() {
  const Counters& c = counters();
  return KernelWork{c.calls.load(std::memory_order_relaxed), c.pages.load(std::memory_order_relaxed),
                    c.ns.load(std::memory_order_relaxed), c.sampled.load(std::memory_order_relaxed),
                    c.beside_running.load(std::memory_order_relaxed)};
}

}  // namespace loom::region
