#pragma once
// Runs a shell command line for the launcher tests: its exit status (128+N for a signal), its
// stdout and stderr together, and how long it took.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace loom::test {

struct Result {
  int status;
  std::string output;
  double seconds;
};

inline Result run(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  Result r{-1, {}, 0};
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace loom::test
