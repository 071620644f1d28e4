#include "loom/dsm/runtime/output.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace loom::runtime {

namespace {

void flush_if_free(FILE* f) {
  // glibc's stream lock is recursive: a handler that interrupted this thread's own write gets
  // it too, and a flush then writes the bytes buffered so far, which is what the write had
  // already produced. Another thread's write keeps the lock, and that stream is left alone.
  if (ftrylockfile(f) != 0) return;
  fflush_unlocked(f);
  funlockfile(f);
}

void on_ending_signal(int sig) {
  flush_output_if_free();
  signal(sig, SIG_DFL);
  raise(sig);  // ends the process as the signal would have (loomrun reports it so)
}

void catch_if_default(int sig) {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0) return;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL) return;  // the program's own
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction != nullptr) return;
  struct sigaction sa {};
  sa.sa_handler = on_ending_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(sig, &sa, nullptr);
}

// Output written before main() (and before a Runtime) is line-buffered too.
[[gnu::constructor]] void at_start_up() { keep_output_on_endings(); }

}  // namespace

void flush_output_if_free() {
  flush_if_free(stdout);
  flush_if_free(stderr);
}

void keep_output_on_endings() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Only under a launcher (loomrun's LOOM_RANK, a PMIx launcher's PMIX_RANK): a program
    // writing to a file by itself keeps full buffering. A terminal is line-buffered anyway.
    if (std::getenv("LOOM_RANK") == nullptr && std::getenv("PMIX_RANK") == nullptr) return;
    if (isatty(STDOUT_FILENO)) return;
    setvbuf(stdout, nullptr, _IOLBF, 0);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) catch_if_default(sig);
  });
}

}  // namespace loom::runtime
