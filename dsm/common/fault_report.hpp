#pragma once
// What a thread was doing when it faulted. A SIGSEGV or SIGBUS nothing handles (not a shared
// region's fault) ends the process as before — with the default action, or through the handler
// that was there (a sanitizer's) — but first one line on stderr says where it happened and, for
// each layer that registered a describer, what the thread was doing (e.g. which remotely called
// function it was running, and for whom).
#include <signal.h>

#include <cstddef>

namespace loom::fault {

// Writes at most `cap` bytes describing this thread's current activity into `buf` and returns
// how many (0: nothing to say). Called in a signal handler: async-signal-safe only (no locks, no
// allocation; thread-local reads are fine).
using Describer = size_t (*)(char* buf, size_t cap);

// Adds a describer (a few per process; the same one twice is kept once). Idempotent install of
// the reporter for SIGSEGV and SIGBUS, keeping the handlers found there to chain to.
void add_describer(Describer d);
void install_reporter();

// Hands a signal to a handler that was installed before (`previous`): its SA_SIGINFO or plain
// handler, or the default action (the faulting instruction runs again and the process ends with
// the usual signal).
void chain(const struct sigaction& previous, int sig, siginfo_t* info, void* ctx);

// Async-signal-safe text building for describers: appends `s` (or the decimal `v`) at buf[at],
// never past `cap`; returns the new length.
size_t append(char* buf, size_t at, size_t cap, const char* s);
size_t append(char* buf, size_t at, size_t cap, long long v);

}  // namespace loom::fault
