#include "loom/dsm/common/fault_report.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace loom::fault {

namespace {

constexpr int kMaxDescribers = 8;
std::atomic<Describer> g_describers[kMaxDescribers];
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;

size_t append_hex(char* buf, size_t at, size_t cap, uintptr_t v) {
  char digits[2 + 2 * sizeof v + 1] = "0x";
  int n = 2;
  bool started = false;
  for (int shift = static_cast<int>(8 * sizeof v) - 4; shift >= 0; shift -= 4) {
    unsigned d = static_cast<unsigned>((v >> shift) & 0xf);
    if (d == 0 && !started && shift != 0) continue;
    started = true;
    digits[n++] = "0123456789abcdef"[d];
  }
  digits[n] = '\0';
  return append(buf, at, cap, digits);
}

void on_fault(int sig, siginfo_t* info, void* ctx) {
  char line[1024];
  size_t n = 0;
  for (auto& slot : g_describers) {
    Describer d = slot.load(std::memory_order_acquire);
    if (d == nullptr) continue;
    char what[768];
    size_t w = d(what, sizeof what - 1);
    if (w == 0) continue;
    what[w] = '\0';
    n = append(line, n, sizeof line, sig == SIGBUS ? "loom: SIGBUS at address " : "loom: SIGSEGV at address ");
    n = append_hex(line, n, sizeof line, reinterpret_cast<uintptr_t>(info->si_addr));
    n = append(line, n, sizeof line, " ");
    n = append(line, n, sizeof line, what);
    n = append(line, n, sizeof line, "\n");
  }
  if (n > 0) {
    ssize_t r = ::write(2, line, n);
    (void)r;
  }
  chain(sig == SIGBUS ? g_previous_bus : g_previous_segv, sig, info, ctx);
}

}  // namespace

size_t append(char* buf, size_t at, size_t cap, const char* s) {
  while (*s != '\0' && at + 1 < cap) buf[at++] = *s++;
  return at;
}

size_t append(char* buf, size_t at, size_t cap, long long v) {
  char digits[24];
  int n = 0;
  unsigned long long u = v < 0 ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) digits[n++] = '-';
  while (n > 0 && at + 1 < cap) buf[at++] = digits[--n];
  return at;
}

void add_describer(Describer d) {
  for (auto& slot : g_describers) {
    Describer cur = slot.load(std::memory_order_acquire);
    if (cur == d) return;
    if (cur == nullptr && slot.compare_exchange_strong(cur, d, std::memory_order_acq_rel)) return;
    if (cur == d) return;
  }
}

void install_reporter() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

void chain(const struct sigaction& previous, int sig, siginfo_t* info, void* ctx) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction != nullptr) return previous.sa_sigaction(sig, info, ctx);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    return previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);
}

}  // namespace loom::fault
