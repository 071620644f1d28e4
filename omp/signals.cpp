// A program's own SIGSEGV handler must not displace the region layer's, which turns faults on
// shared memory into the protocol's fetches: while the layer runs, `signal` and `sigaction`
// for SIGSEGV set the handler the region layer passes other faults on to (GFortran's runtime
// installs its backtrace handler when main starts). Anything else goes to the C library.
//
// A sanitizer's runtime calls these too, before it is initialized (it finds them as the next
// `sigaction` after its own): they are not instrumented and call nothing that is until the
// layer runs (their shared words are read with the compiler's atomic builtins, not std::atomic's
// functions, which an instrumented build may leave out of line).
#include <dlfcn.h>
#include <signal.h>

#include <cerrno>

#include "loom/dsm/region/region.hpp"
#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"

#define LOOM_OMP_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread", "undefined")))

namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

bool g_keep_segv = false;
SigactionFn g_real = nullptr;

LOOM_OMP_UNINSTRUMENTED int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn real = __atomic_load_n(&g_real, __ATOMIC_RELAXED);
  if (real == nullptr) {
    real = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    __atomic_store_n(&g_real, real, __ATOMIC_RELAXED);
  }
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(sig, act, old);
}

}  // namespace

namespace loom::omp {
void keep_segv_handler_first(bool yes) { __atomic_store_n(&g_keep_segv, yes, __ATOMIC_RELEASE); }
}  // namespace loom::omp

LOOM_OMP_API LOOM_OMP_UNINSTRUMENTED int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig == SIGSEGV && __atomic_load_n(&g_keep_segv, __ATOMIC_ACQUIRE) && loom::region::replace_chained_handler(act, old))
    return 0;
  return real_sigaction(sig, act, old);
}

LOOM_OMP_API LOOM_OMP_UNINSTRUMENTED sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act {}, old {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
