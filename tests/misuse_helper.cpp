// A Loom program misused on purpose, one way per mode (argv[1]); the launcher tests
// (tests/test_launcher.cpp, Misuse.*) check that each misuse ends the job with a clear error
// instead of passing in silence, hanging or crashing without a word.
//   registry   rank 1 registers a function rank 0 does not: the Invoker's start-up names it
//   bad-call   rank 0 calls a function id nobody registered: rank 1's poll fails naming it
//   unpolled   rank 0 calls rank 1, which never polls: rank 1's teardown names the call
//   fault      rank 0 calls rank 1 with a pointer into its own memory: rank 1's SIGSEGV names the call
//   make-lock  rank 0 makes one lock more than rank 1, then both count under "the same" lock:
//              a wrong count without the checking mode; with it (LOOM_CHECK=on) an error naming both calls
//   dsm-barrier  rank 0 calls Space::barrier once more than rank 1: an error naming both calls in
//              checking mode; without it, a stall report naming the rank waited for
//   invoke-barrier  rank 0 makes one lock more, then both call Invoker::barrier: an error naming
//              both calls in every mode (the barrier's messages carry each process's call)
//   threads    one thread calls Space::barrier under loomrun --threads 2: a stall report saying 1 of 2 arrived
//   rt-barrier a process writes a shared region, then calls Runtime::barrier where Space::barrier
//              was meant: a warning in checking mode
//   qps-differ rank 1 asks for two queue pairs per peer (LOOM_QPS_PER_PEER), rank 0 for one: the
//              Runtime's start-up names both values
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "loom/coherence/space.hpp"
#include "loom/invoke/calls.hpp"
#include "tests/test_settings_table.hpp"  // the suites' own settings, known to the start-up check

using namespace loom;
using namespace loom::invoke;

namespace {

void only_on_one(int, std::span<const std::byte>) {}

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
  // An address rank 1 cannot access (a page it maps without access and keeps, so no other
  // mapping of the process — a sanitizer's, another thread's — can take it; the kernel chose
  // it, so any sanitizer's memory layout allows it), where rank 0 maps a page of its own.
  // (Unmapped instead, the page was mapped again by something else in 2 of 20 runs under TSan,
  // and the call read it without a fault.)
  uint64_t hole = 0;
  if (rt.rank() == 1) {
    void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 20;
    hole = reinterpret_cast<uint64_t>(p);
  }
  hole = rt.bootstrap().allgather_value(hole)[1];
  if (rt.rank() == 0) {
    void* p = mmap(reinterpret_cast<void*>(hole), 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return 21;
    auto* mine = static_cast<uint64_t*>(p);
    *mine = 42;
    call(Thread{1, 0}, [mine] { std::printf("read %llu\n", static_cast<unsigned long long>(*mine)); });
    inv.flush();
  }
  inv.wait_until([&] { return never.load(); });
  return 0;
}

int make_lock(Runtime& rt) {
  coherence::Space dsm(rt);
  region::Region& r = dsm.create_region(1 << 20);
  auto* count = r.new_array<uint64_t>(1);
  if (rt.rank() == 0) dsm.make_lock();  // one lock more here: the next lock is another lock here
  coherence::Lock l = dsm.make_lock();
  for (int i = 0; i < 2000; ++i) {
    l.lock();
    *count += 1;
    l.unlock();
  }
  dsm.barrier();
  const uint64_t want = 2000ull * static_cast<uint64_t>(rt.size());
  std::printf("count %llu (want %llu)\n", static_cast<unsigned long long>(*count), static_cast<unsigned long long>(want));
  dsm.barrier();
  return *count == want ? 0 : 3;
}

int dsm_barrier(Runtime& rt) {
  coherence::Space dsm(rt);
  dsm.barrier();
  if (rt.rank() == 0) dsm.barrier();  // once more than the others
  return 0;
}

int invoke_barrier(Runtime& rt) {
  coherence::Space dsm(rt);
  Invoker inv(rt);
  if (rt.rank() == 0) dsm.make_lock();
  inv.barrier();
  std::puts("after the barrier");
  return 0;
}

int threads(Runtime& rt) {
  coherence::Space dsm(rt);
  dsm.barrier();  // only the main thread: loomrun --threads 2 said there are two
  return 0;
}

int rt_barrier(Runtime& rt) {
  coherence::Space dsm(rt);
  region::Region& r = dsm.create_region(1 << 20);
  auto* v = r.new_array<uint64_t>(1024);
  if (rt.rank() == 0) v[0] = 42;
  rt.barrier();  // meant: dsm.barrier()
  std::printf("rank %d reads %llu\n", rt.rank(), static_cast<unsigned long long>(v[0]));
  dsm.barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: misuse_helper registry|bad-call|unpolled|fault|make-lock|dsm-barrier|invoke-barrier|threads|rt-barrier|qps-differ\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "qps-differ" && std::getenv("LOOM_RANK") != nullptr && std::string(std::getenv("LOOM_RANK")) == "1")
    setenv("LOOM_QPS_PER_PEER", "2", 1);
  Runtime rt(argc, argv);
  if (mode == "qps-differ") return 0;  // the Runtime must have refused to start
  if (mode == "registry") return registry(rt);
  if (mode == "bad-call") return bad_call(rt);
  if (mode == "unpolled") return unpolled(rt);
  if (mode == "fault") return fault(rt);
  if (mode == "make-lock") return make_lock(rt);
  if (mode == "dsm-barrier") return dsm_barrier(rt);
  if (mode == "threads") return threads(rt);
  if (mode == "invoke-barrier") return invoke_barrier(rt);
  if (mode == "rt-barrier") return rt_barrier(rt);
  std::fprintf(stderr, "misuse_helper: unknown mode %s\n", mode.c_str());
  return 2;
}
