// The process start of an OpenMP program on Loom. The program's _start calls
// __libc_start_main, which this library defines: before the C library's own start (which runs
// the program's global constructors, then main) it
//   1. starts the process again, once, with one address layout for every process (address
//      randomization off) and every symbol bound at load (LD_BIND_NOW: nothing writes the
//      shared globals' pages behind the protocol's back);
//   2. refuses a program that also loaded libgomp (an OpenMP call could reach it instead);
//   3. starts the layer's runtime, Space, shared stack and shared heap (collective), so what the
//      constructors allocate comes from the shared heap;
// and hands the C library our main, which
//   4. shares the program's globals, holding rank 0's bytes (the constructors ran in every
//      process), and starts the team (collective); then on rank 0 runs the program's main on
//      the shared stack, and on every other rank serves the team's regions until rank 0's
//      program ends;
//   5. ends the layer collectively: after main returns, or in an exit handler when the program
//      calls exit() from serial code (exit() inside a region ends the process at once).
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <link.h>
#include <sys/personality.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>
#include <cstdlib>
#include <cstring>
#include <string>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"
#include "loom/omp/program_data.hpp"
#include "loom/omp/layer.hpp"

namespace loom::omp {
namespace {

using MainFn = int (*)(int, char**, char**);
using StartMain = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);

MainFn g_program_main = nullptr;
int g_argc = 0;
char** g_argv = nullptr;
char** g_envp = nullptr;
int g_status = 0;
Layer* g_started = nullptr;
ucontext_t g_start_context, g_program_context;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "loom-omp: %s\n", what.c_str());
  std::fflush(stderr);
  _exit(1);
}

// Step 1: the same layout in every process, symbols bound at load.
void ensure_one_layout(char** argv) {
  const int persona = personality(0xffffffff);
  const bool fixed = persona != -1 && (persona & ADDR_NO_RANDOMIZE) != 0;
  const bool bound = std::getenv("LD_BIND_NOW") != nullptr && std::getenv("LD_BIND_NOW")[0] != '\0';
  if (fixed && bound) return;
  if (std::getenv("LOOM_OMP_RESTARTED") != nullptr)
    die("started again without address randomization and with LD_BIND_NOW, but the process still has them off (a "
        "sandbox that forbids personality()?)");
  if (personality(static_cast<unsigned long>(persona) | ADDR_NO_RANDOMIZE) == -1)
    die(std::string("cannot turn address randomization off: ") + std::strerror(errno));
  setenv("LD_BIND_NOW", "1", 1);
  setenv("LOOM_OMP_RESTARTED", "1", 1);
  execv("/proc/self/exe", argv);
  die(std::string("cannot start the program again: ") + std::strerror(errno));
}

// Step 2: libgomp in the process means some OpenMP call may bind to it.
void refuse_libgomp() {
  int found = dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) -> int {
        return info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libgomp") != nullptr ? 1 : 0;
      },
      nullptr);
  if (found != 0)
    die("the program also loaded libgomp: it calls an OpenMP entry point the Loom layer does not define "
        "(docs/openmp.md, What is refused), or was linked without the layer's line ($(pkg-config --libs "
        "loom-omp), whose --as-needed leaves libgomp out); every OpenMP call must reach Loom");
}

void end_layer() {
  stop_program_heap();
  keep_segv_handler_first(false);
  Layer* l = g_started;
  g_started = nullptr;
  delete l;
}

// The program ended by exit() while main was running: end the layer here (on the shared stack,
// which stays mapped: it is given back as private memory in one step).
void end_at_exit() {
  if (g_started != nullptr && g_started->rank() == 0) on_private_stack([](void*) { end_layer(); }, nullptr);
}

// exit() inside a parallel region — a thread's error path, on any rank — cannot end the layer
// collectively (the region's other threads wait in its barriers), nor run exit handlers beside
// them over shared memory: the process ends at once with the status, its output flushed, and
// the launcher ends the job with it. Rank 0's master in serial code exits normally.
[[noreturn]] void exit_program(int status) {
  Layer* l = g_started;
  if (l != nullptr && (l->rank() != 0 || l->team().region_active())) {
    std::fflush(nullptr);
    _exit(status);
  }
  using ExitFn = void (*)(int);
  auto real = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "exit"));
  if (real == nullptr) die("cannot find the C library's exit");
  real(status);
  __builtin_unreachable();
}

// The program's own allocations come from the shared heap from here on: code in the
// executable's executable segments.
void start_heap(Layer& layer) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (const PageRange& r : program_code()) lo = std::min(lo, r.start), hi = std::max(hi, r.end);
  if (hi > lo && layer.heap() != nullptr) start_program_heap(layer.heap(), lo, hi);
}

void run_program() { g_status = g_program_main(g_argc, g_argv, g_envp); }

// Rank 0's master runs main's serial code on the shared stack, whose blocks the protocol may
// protect at any acquire. The protocol itself must not run there (it would fault on the page it
// runs on), so the master's faults are handled on an alternate signal stack and its calls into
// the layer from serial code (regions, critical sections, the end) on a private stack.
struct PrivateStack {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  ucontext_t caller, callee;
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;
  std::exception_ptr error;
} g_private;

uint8_t* map_private(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) die(std::string("cannot map a private stack: ") + std::strerror(errno));
  return static_cast<uint8_t*>(p);
}

void prepare_master_stacks(const Layer& layer) {
  constexpr size_t kSignalStack = size_t{1} << 20;
  stack_t ss{};
  ss.ss_sp = map_private(kSignalStack);
  ss.ss_size = kSignalStack;
  if (sigaltstack(&ss, nullptr) != 0) die(std::string("sigaltstack: ") + std::strerror(errno));
  g_private.bytes = layer.stack_bytes();
  g_private.base = map_private(g_private.bytes);
}

void private_trampoline() {
  try {
    g_private.fn(g_private.arg);
  } catch (...) {
    g_private.error = std::current_exception();
  }
}

bool on_shared_stack() {
  Layer* l = Layer::find();
  if (l == nullptr || l->rank() != 0 || g_private.base == nullptr) return false;
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const auto lo = reinterpret_cast<uintptr_t>(l->stack());
  return sp >= lo && sp < lo + l->stack_bytes();
}

// Rank 0: main on the shared stack; back here when it returns.
int run_main_on_shared_stack(Layer& layer) {
  if (getcontext(&g_program_context) != 0) die("getcontext failed");
  g_program_context.uc_stack.ss_sp = layer.stack();
  g_program_context.uc_stack.ss_size = layer.stack_bytes();
  g_program_context.uc_link = &g_start_context;
  makecontext(&g_program_context, run_program, 0);
  if (swapcontext(&g_start_context, &g_program_context) != 0) die("swapcontext failed");
  return g_status;
}

}  // namespace

void on_private_stack(void (*fn)(void*), void* arg) {
  if (!on_shared_stack()) return fn(arg);
  if (g_private.fn != nullptr) fail("omp: the master's private stack is in use already");
  g_private.fn = fn;
  g_private.arg = arg;
  g_private.error = nullptr;
  if (getcontext(&g_private.callee) != 0) die("getcontext failed");
  g_private.callee.uc_stack.ss_sp = g_private.base;
  g_private.callee.uc_stack.ss_size = g_private.bytes;
  g_private.callee.uc_link = &g_private.caller;
  makecontext(&g_private.callee, private_trampoline, 0);
  if (swapcontext(&g_private.caller, &g_private.callee) != 0) die("swapcontext failed");
  g_private.fn = nullptr;
  if (g_private.error) std::rethrow_exception(std::exchange(g_private.error, nullptr));
}

namespace {

// Steps 1-3, before the program's constructors.
void start_layer(int& argc, char**& argv) {
  ensure_one_layout(argv);
  refuse_libgomp();
  try {
    g_started = new Layer(argc, argv, program_heap_reachable());
  } catch (const std::exception& e) {
    die(e.what());
  }
  keep_segv_handler_first(true);
  start_heap(*g_started);
}

int layer_main(int argc, char** argv, char** envp) {
  g_argc = argc, g_argv = argv, g_envp = envp;
  try {
    g_started->share_program();
  } catch (const std::exception& e) {
    die(e.what());
  }
  if (g_started->rank() != 0) {
    try {
      g_started->team().serve();
      end_layer();
    } catch (const std::exception& e) {
      die(e.what());
    }
    std::fflush(nullptr);
    _exit(0);  // the program ran on rank 0; its exit handlers and destructors run there only
  }
  prepare_master_stacks(*g_started);
  std::atexit(end_at_exit);
  const int status = run_main_on_shared_stack(*g_started);
  end_layer();
  return status;
}

}  // namespace
}  // namespace loom::omp

LOOM_OMP_API void exit(int status) noexcept { loom::omp::exit_program(status); }

LOOM_OMP_API int __libc_start_main(loom::omp::MainFn main, int argc, char** argv, void (*init)(), void (*fini)(),
                                   void (*rtld_fini)(), void* stack_end) {
  auto real = reinterpret_cast<loom::omp::StartMain>(dlsym(RTLD_NEXT, "__libc_start_main"));
  if (real == nullptr) loom::omp::die("cannot find the C library's __libc_start_main");
  loom::omp::g_program_main = main;
  loom::omp::start_layer(argc, argv);
  return real(loom::omp::layer_main, argc, argv, init, fini, rtld_fini, stack_end);
}
