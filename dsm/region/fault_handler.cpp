#include "loom/dsm/region/fault_handler.hpp"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "loom/dsm/common/fault_report.hpp"
#include "loom/dsm/region/region.hpp"

namespace loom::region {
namespace {

std::atomic<AddressSpace*> g_space{nullptr};
struct sigaction g_previous;
thread_local int t_in_runtime = 0;

void say(const char* s) {
  ssize_t r = ::write(2, s, std::strlen(s));
  (void)r;
}

void say_addr(const char* prefix, const void* a, const char* suffix) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s%p%s", prefix, a, suffix);
  say(buf);
}

Access access_of(void* ctx) {
#if defined(__x86_64__)
  // Page-fault error code: bit 1 is set for writes.
  auto* uc = static_cast<ucontext_t*>(ctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? Access::Write : Access::Read;
#else
  (void)ctx;
  return Access::Unknown;
#endif
}

void on_segv(int sig, siginfo_t* info, void* ctx) {
  int saved = errno;
  // Pairs with attach_space's CAS of g_space (the address space is built before a fault finds it).
  AddressSpace* space = g_space.load(std::memory_order_acquire);
  void* addr = info->si_addr;
  Region* r = space ? space->find(addr) : nullptr;
  if (r == nullptr) {
    if (space != nullptr && addr >= space->reserve_base() && addr < space->reserve_base() + space->reserve_size())
      say_addr("loom: access to ", addr, ", inside the shared-region reserve but outside any region\n");
    errno = saved;
    // A fault we do not own goes to whoever handled SIGSEGV before us: the runtime's fault
    // reporter (dsm/common/fault_report.hpp), a sanitizer, or the default action.
    return fault::chain(g_previous, sig, info, ctx);
  }
  if (t_in_runtime != 0) {
    say_addr("loom: the runtime itself faulted on region memory at ", addr,
             " (the protocol must use the runtime view); aborting\n");
    abort();
  }
  size_t b = r->block_of(addr);
  space->sink().on_fault(*r, b, access_of(ctx));
  errno = saved;
}

void install_handler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  // On a thread with an alternate signal stack the handler runs there: a thread whose own stack
  // is region memory (the OpenMP layer's master) may fault on it.
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_previous) != 0) throw SystemError("region: sigaction(SIGSEGV)", errno);
}

void uninstall_handler() { sigaction(SIGSEGV, &g_previous, nullptr); }

}  // namespace

void attach_space(AddressSpace* space) {
  AddressSpace* expected = nullptr;
  if (!g_space.compare_exchange_strong(expected, space)) fail("region: one address space per process at a time");
  try {
    install_handler();
  } catch (...) {
    g_space.store(nullptr);
    throw;
  }
}

bool replace_chained_handler(const struct sigaction* act, struct sigaction* old) {
  if (g_space.load(std::memory_order_acquire) == nullptr) return false;
  if (old != nullptr) *old = g_previous;
  if (act != nullptr) g_previous = *act;
  return true;
}

void detach_space() {
  uninstall_handler();
  g_space.store(nullptr, std::memory_order_release);
}

InRuntime::InRuntime() { ++t_in_runtime; }
InRuntime::~InRuntime() { --t_in_runtime; }
bool InRuntime::active() { return t_in_runtime != 0; }

}  // namespace loom::region
