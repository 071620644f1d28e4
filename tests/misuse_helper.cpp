// A Loom program misused on purpose, one way per mode (argv[1]); the launcher tests
// (tests/test_launcher.cpp, Misuse.*) check that each misuse ends the job with a clear error
// instead of passing in silence, hanging or crashing without a word (issue 21).
//   registry   rank 1 registers a function rank 0 does not: the Invoker's start-up names it
//   bad-call   rank 0 calls a function id nobody registered: rank 1's poll fails naming it
//   unpolled   rank 0 calls rank 1, which never polls: rank 1's teardown names the call
//   fault      rank 0 calls rank 1 with a pointer into its own memory: rank 1's SIGSEGV names the call
#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "loom/invoke/calls.hpp"

using namespace loom;
using namespace loom::invoke;

namespace {

void only_on_one(int, std::span<const std::byte>) {}

// A page at the same address can exist in rank 0 only: mapped there, never in rank 1.
constexpr uintptr_t kPrivatePage = 0x6f0000000000;

int registry(Runtime& rt) {
  if (rt.rank() == 1) register_function("misuse.only_on_one", &only_on_one);
  Invoker inv(rt);  // fails on every process, naming the function
  return 0;
}

int bad_call(Runtime& rt) {
  Invoker inv(rt);
  std::atomic<bool> never{false};
  if (rt.rank() == 0) {
    uint64_t v = 1;
    call_named(Thread{1, 0}, 0xdeadbeef, std::as_bytes(std::span(&v, 1)));
    inv.flush();
  }
  inv.wait_until([&] { return never.load(); });  // rank 1's poll meets the bad call and throws
  return 0;
}

int unpolled(Runtime& rt) {
  Invoker inv(rt);
  if (rt.rank() == 0) call(Thread{1, 0}, [] { std::puts("ran"); });
  return 0;  // the Invoker's teardown: rank 1 never polled
}

int fault(Runtime& rt) {
  Invoker inv(rt);
  std::atomic<bool> never{false};
  if (rt.rank() == 0) {
    void* p = mmap(reinterpret_cast<void*>(kPrivatePage), 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return 20;
    auto* mine = static_cast<uint64_t*>(p);
    *mine = 42;
    call(Thread{1, 0}, [mine] { std::printf("read %llu\n", static_cast<unsigned long long>(*mine)); });
    inv.flush();
  }
  inv.wait_until([&] { return never.load(); });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: misuse_helper registry|bad-call|unpolled|fault\n");
    return 2;
  }
  Runtime rt(argc, argv);
  const std::string mode = argv[1];
  if (mode == "registry") return registry(rt);
  if (mode == "bad-call") return bad_call(rt);
  if (mode == "unpolled") return unpolled(rt);
  if (mode == "fault") return fault(rt);
  std::fprintf(stderr, "misuse_helper: unknown mode %s\n", mode.c_str());
  return 2;
}
