#include "loom/omp/inline_atomics.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/atomic_ops.hpp"

namespace loom::omp {
namespace {

std::vector<AtomicSite> g_sites;  // sorted by pc; written once, before other threads run
std::vector<AtomicSite> g_unsupported;
uint64_t g_fences = 0, g_first_fence = 0;  // of g_sites, GCC's full fences (counted with them)
std::atomic<AtomicRouter*> g_router{nullptr};
std::atomic<uint64_t> g_shared{0}, g_local{0}, g_fences_run{0};
struct sigaction g_previous {};
constexpr uint8_t kBreakpoint = 0xcc;

// ucontext's slot for each register, in the encoding's order.
constexpr int kSlot[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                           REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

uint64_t read_gpr(const greg_t* g, Gpr r, unsigned width) {
  const auto v = static_cast<uint64_t>(g[kSlot[r.index]]);
  return r.high ? (v >> 8) & 0xff : truncate(v, width);
}

// As the processor writes a register: a 4-byte write clears the upper half, 1 and 2 keep it.
void write_gpr(greg_t* g, Gpr r, unsigned width, uint64_t value) {
  auto& slot = g[kSlot[r.index]];
  auto v = static_cast<uint64_t>(slot);
  if (r.high) {
    v = (v & ~uint64_t{0xff00}) | ((value & 0xff) << 8);
  } else if (width >= 4) {
    v = truncate(value, width);
  } else {
    const uint64_t mask = (uint64_t{1} << (8 * width)) - 1;
    v = (v & ~mask) | (value & mask);
  }
  slot = static_cast<greg_t>(v);
}

uint64_t fs_base() {
  uint64_t base;
  asm("movq %%fs:0, %0" : "=r"(base));  // the C library's thread control block points at itself
  return base;
}

uint64_t effective_address(const AtomicSite& s, const greg_t* g) {
  const MemRef& m = s.mem;
  uint64_t a = static_cast<uint64_t>(m.disp);
  if (m.rip_relative) a += s.next_pc();
  if (m.base.index >= 0) a += read_gpr(g, m.base, 8);
  if (m.index.index >= 0) a += read_gpr(g, m.index, 8) * m.scale;
  if (m.fs) a += fs_base();
  return a;
}

uint64_t load(uintptr_t a, unsigned width) {
  uint64_t v = 0;
  std::memcpy(&v, reinterpret_cast<const void*>(a), width);
  return v;
}

void store(uintptr_t a, unsigned width, uint64_t v) { std::memcpy(reinterpret_cast<void*>(a), &v, width); }

template <class T>
bool compare_swap_as(uintptr_t a, uint64_t expected, uint64_t desired) {
  T e = static_cast<T>(expected);
  return __atomic_compare_exchange_n(reinterpret_cast<T*>(a), &e, static_cast<T>(desired), false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

bool compare_swap(uintptr_t a, unsigned width, uint64_t expected, uint64_t desired) {
  switch (width) {
    case 1: return compare_swap_as<uint8_t>(a, expected, desired);
    case 2: return compare_swap_as<uint16_t>(a, expected, desired);
    case 4: return compare_swap_as<uint32_t>(a, expected, desired);
    default: return compare_swap_as<uint64_t>(a, expected, desired);
  }
}

// The instruction's effect, atomic among this process's threads: a compare-and-swap loop on the
// memory (a step that changes nothing still reads the value atomically).
AtomicEffect carry_out_locally(const AtomicSite& s, uintptr_t a, uint64_t src, uint64_t acc, uint64_t flags) {
  for (;;) {
    uint64_t old = 0;
    switch (s.width) {
      case 1: old = __atomic_load_n(reinterpret_cast<uint8_t*>(a), __ATOMIC_SEQ_CST); break;
      case 2: old = __atomic_load_n(reinterpret_cast<uint16_t*>(a), __ATOMIC_SEQ_CST); break;
      case 4: old = __atomic_load_n(reinterpret_cast<uint32_t*>(a), __ATOMIC_SEQ_CST); break;
      default: old = __atomic_load_n(reinterpret_cast<uint64_t*>(a), __ATOMIC_SEQ_CST); break;
    }
    AtomicEffect e = apply_atomic(s.op, s.width, old, src, acc, flags);
    if (!e.store || compare_swap(a, s.width, old, e.memory)) return e;
  }
}

// Atomic across processes: the line's DSM lock is held from the read to the write, and its
// release publishes the write (paired with the acquire of the next process to take it).
// A step that may fault on shared memory, which the region layer's SIGSEGV handler serves: it
// must not be blocked here (TSan's interceptor blocks every signal while a handler runs). The
// mask from before the trap comes back with the return. Local steps need no syscall.
void unblock_segv() {
  sigset_t segv;
  sigemptyset(&segv);
  sigaddset(&segv, SIGSEGV);
  pthread_sigmask(SIG_UNBLOCK, &segv, nullptr);
}

AtomicEffect carry_out_shared(AtomicRouter& r, const AtomicSite& s, uintptr_t a, uint64_t src, uint64_t acc,
                              uint64_t flags) {
  unblock_segv();
  r.lock(a);
  AtomicEffect e = apply_atomic(s.op, s.width, load(a, s.width), src, acc, flags);
  if (e.store) store(a, s.width, e.memory);
  r.unlock(a);
  return e;
}

// A fence across processes (the router's), then the instruction's own effect on the flags: `or
// $0` leaves the stack word as it is, so nothing is stored. The stack may be region memory (rank
// 0's master runs on it) made inaccessible by the acquire: its load may fault.
AtomicEffect carry_out_fence(AtomicRouter& r, const AtomicSite& s, uintptr_t a, uint64_t src, uint64_t acc,
                             uint64_t flags) {
  unblock_segv();
  r.fence();
  AtomicEffect e = apply_atomic(s.op, s.width, load(a, s.width), src, acc, flags);
  e.store = false;
  return e;
}

bool is_bit_op(AtomicOp op) { return op == AtomicOp::Bts || op == AtomicOp::Btr || op == AtomicOp::Btc; }

void carry_out(const AtomicSite& s, greg_t* g) {
  uintptr_t a = effective_address(s, g);
  uint64_t src = s.src.index >= 0 ? read_gpr(g, s.src, s.width) : truncate(static_cast<uint64_t>(s.imm), s.width);
  if (is_bit_op(s.op) && s.src.index >= 0) {
    // A register's bit number is signed and may reach past the operand: it picks the operand.
    const int64_t bits = 8 * s.width;
    int64_t n = static_cast<int64_t>(src);
    if (s.width == 2) n = static_cast<int16_t>(src);
    if (s.width == 4) n = static_cast<int32_t>(src);
    const int64_t unit = n >= 0 ? n / bits : -((-n + bits - 1) / bits);
    a += static_cast<uintptr_t>(unit * s.width);
    src = static_cast<uint64_t>(n - unit * bits);
  }
  const uint64_t acc = truncate(static_cast<uint64_t>(g[REG_RAX]), s.width);
  const uint64_t flags = static_cast<uint64_t>(g[REG_EFL]);
  AtomicRouter* r = g_router.load(std::memory_order_acquire);
  AtomicEffect e;
  if (r != nullptr && s.is_fence()) {
    e = carry_out_fence(*r, s, a, src, acc, flags);
    g_fences_run.fetch_add(1, std::memory_order_relaxed);
  } else if (r != nullptr && r->shared(a)) {
    e = carry_out_shared(*r, s, a, src, acc, flags);
    g_shared.fetch_add(1, std::memory_order_relaxed);
  } else {
    e = carry_out_locally(s, a, src, acc, flags);
    g_local.fetch_add(1, std::memory_order_relaxed);
  }
  if (e.reg == AtomicEffect::Reg::Source) write_gpr(g, s.src, s.width, e.value);
  if (e.reg == AtomicEffect::Reg::Accumulator) write_gpr(g, Gpr{0, false}, s.width, e.value);
  g[REG_EFL] = static_cast<greg_t>(e.flags);
  g[REG_RIP] = static_cast<greg_t>(s.next_pc());
}

const AtomicSite* site_at(uint64_t pc) {
  auto it = std::lower_bound(g_sites.begin(), g_sites.end(), pc, [](const AtomicSite& s, uint64_t p) { return s.pc < p; });
  return it != g_sites.end() && it->pc == pc ? &*it : nullptr;
}

void pass_on(int sig, siginfo_t* info, void* uc) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, uc);
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) return g_previous.sa_handler(sig);
  // As without a handler: the breakpoint ends the process with SIGTRAP.
  signal(SIGTRAP, SIG_DFL);
  raise(SIGTRAP);
}

void on_trap(int sig, siginfo_t* info, void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  greg_t* g = uc->uc_mcontext.gregs;
  const AtomicSite* s = site_at(static_cast<uint64_t>(g[REG_RIP]) - 1);  // RIP is past the INT3
  if (s == nullptr) return pass_on(sig, info, ucv);
  const int saved = errno;
  carry_out(*s, g);
  errno = saved;
}

// Uninstrumented: a sanitizer keeps no shadow for the program's code.
__attribute__((no_sanitize("address", "thread", "undefined"))) void patch(const AtomicSite& s, size_t page) {
  const uintptr_t first = s.pc / page * page;
  const size_t bytes = s.pc + 1 - first;
  void* p = reinterpret_cast<void*>(first);
  if (mprotect(p, bytes, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
    fail("omp: cannot make the program's code writable to replace an atomic: ", std::strerror(errno));
  *reinterpret_cast<volatile uint8_t*>(s.pc) = kBreakpoint;
  if (mprotect(p, bytes, PROT_READ | PROT_EXEC) != 0) fail("omp: cannot protect the program's code again: ", std::strerror(errno));
}

}  // namespace

void replace_inline_atomics(std::span<const PageRange> code, AtomicRouter* router) {
  if (!g_sites.empty()) fail("omp: the program's atomics are replaced once per process");
  for (const PageRange& r : code) {
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(r.start), r.bytes());
    for (AtomicSite& s : find_atomics(bytes, r.start))
      (s.op == AtomicOp::Unsupported ? g_unsupported : g_sites).push_back(std::move(s));
  }
  std::sort(g_sites.begin(), g_sites.end(), [](const AtomicSite& a, const AtomicSite& b) { return a.pc < b.pc; });
  for (const AtomicSite& s : g_sites) {
    if (!s.is_fence()) continue;
    if (g_fences++ == 0) g_first_fence = s.pc;
  }
  g_router.store(router, std::memory_order_release);
  struct sigaction act {};
  act.sa_sigaction = on_trap;
  act.sa_flags = SA_SIGINFO | SA_ONSTACK;  // the master's stack may be region memory
  sigemptyset(&act.sa_mask);
  if (sigaction(SIGTRAP, &act, &g_previous) != 0) fail("omp: cannot install the SIGTRAP handler: ", std::strerror(errno));
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (const AtomicSite& s : g_sites) patch(s, page);
}

void set_atomic_router(AtomicRouter* router) { g_router.store(router, std::memory_order_release); }

InlineAtomicStats inline_atomic_stats() {
  return InlineAtomicStats{g_sites.size(), g_unsupported.size(), g_shared.load(std::memory_order_relaxed),
                           g_local.load(std::memory_order_relaxed), g_fences, g_fences_run.load(std::memory_order_relaxed),
                           g_first_fence};
}

std::vector<AtomicSite> unsupported_atomics() { return g_unsupported; }

}  // namespace loom::omp
