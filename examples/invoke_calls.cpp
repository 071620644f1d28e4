// Seed 000 Appendix A, rewritten for Loom: every thread produces data in registered memory and
// ships it with a one-sided call_buffer to the next thread (RDMA WRITE, then the call), handles
// the calls others made to it, then makes a send-based call whose Executed-mode Synchronizer
// tells it when the destination has run it.
// Run: loomrun -n 2 --threads 2 invoke_calls
#include <cstdio>
#include <thread>
#include <vector>

#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/invoke/calls.hpp"

using namespace loom;
using namespace loom::invoke;

std::atomic<int> g_sum{0};
std::atomic<int> g_got[64];  // calls run, per worker thread of this process

void ran_one() { g_got[Invoker::current().self().index].fetch_add(1); }

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  Invoker inv(rt);  // collective; one Inbox per worker thread, Messengers created on first use
  const int total = inv.total_threads();

  // Each thread's landing buffer, allocated in its process and named to the others.
  std::vector<RemoteMemoryLocator> landing(static_cast<size_t>(total));
  std::vector<memory::RDMAMemory> mine;
  for (int t = 0; t < inv.threads(); ++t) {
    mine.push_back(rt.heap().allocate(256));
    RemoteMemoryLocator l{rt.rank(), 0, mine.back().address(), 256, mine.back().rkey};
    auto all = rt.bootstrap().allgather(std::as_bytes(std::span(&l, 1)));
    for (int r = 0; r < rt.size(); ++r)
      std::memcpy(&landing[static_cast<size_t>(r * inv.threads() + t)], all[static_cast<size_t>(r)].data(), sizeof l);
  }

  auto worker = [&](int index) {
    const Thread me{rt.rank(), index};
    const int next_gid = (inv.gid(me) + 1) % total;
    const Thread next = inv.thread_of(next_gid);

    // Produce data in registered memory and write it into the next thread's buffer, then run
    // a function there that reads it (one-sided: RDMA WRITE, then the call).
    memory::RDMAMemory data = rt.heap().allocate(64);
    for (int i = 0; i < 64; ++i) data.bytes()[i] = static_cast<uint8_t>(inv.gid(me) + i);
    Synchronizer written(1);
    const int from = inv.gid(me);
    call_buffer(next, [from](std::span<std::byte> b) {
      g_sum.fetch_add(static_cast<int>(b[0]));
      ran_one();
      std::printf("thread %d/%d got 64 bytes from thread %d (first byte %d)\n", Runtime::current().rank(),
                  Invoker::current().self().index, from, static_cast<int>(b[0]));
    }, data, landing[static_cast<size_t>(next_gid)], &written);
    written.wait();  // our 64 bytes may be reused now

    // A send-based call (no setup, through the service thread) with a captured value; the
    // Synchronizer is notified when the destination ran it.
    Synchronizer ran(1);
    send::call<Notify::Executed>(next, [from] {
      g_sum.fetch_add(1000 + from);
      ran_one();
    }, &ran);
    ran.wait();  // handles the calls made to this thread meanwhile
    // Handle calls until both calls made to this thread (one of each kind) have run here.
    inv.wait_until([index] { return g_got[index].load() == 2; });
    rt.heap().free(data.addr);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < inv.threads(); ++t) threads.push_back(rt.spawn_at(t, "worker", [&worker, t] { worker(t); }));
  worker(0);
  for (auto& t : threads) t.join();
  int expected = 0;
  for (int t = 0; t < inv.threads(); ++t) {
    int prev = (rt.rank() * inv.threads() + t - 1 + total) % total;
    expected += prev + 1000 + prev;
  }
  std::printf("rank %d: sum %d (expected %d)\n", rt.rank(), g_sum.load(), expected);
  for (auto& m : mine) rt.heap().free(m.addr);
  return g_sum.load() == expected ? 0 : 1;
}
