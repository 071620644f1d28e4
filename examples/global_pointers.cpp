// Global pointers (objects/): a distributed array of counters incremented with remote atomics by
// every process, a block of results written asynchronously into the next process's memory, and
// a buffer allocated at another rank.
// Run: loomrun -n 4 global_pointers
#include <cstdio>
#include <vector>

#include "loom/objects/distributed_array.hpp"
#include "loom/objects/endpoint.hpp"

using namespace loom;

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  objects::Endpoint ep(rt);  // collective
  const int me = rt.rank(), n = rt.size();

  // One counter per process, in that process's registered memory.
  objects::DistributedArray<uint64_t> counters(ep, static_cast<size_t>(n));  // collective
  counters.local()[0] = 0;
  rt.barrier();
  for (int r = 0; r < n; ++r) ep.fetch_add(counters.ptr(static_cast<size_t>(r)), static_cast<uint64_t>(me + 1));
  rt.barrier();
  const uint64_t mine = counters.local()[0];  // the owner reads its element with a plain load

  // 1000 results per process, written into the next process's block without waiting for each.
  objects::DistributedArray<double> results(ep, 1000 * static_cast<size_t>(n));
  std::vector<double> out(1000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = me + i / 1000.0;
  const size_t next = static_cast<size_t>((me + 1) % n) * 1000;
  for (size_t i = 0; i < out.size(); i += 100) ep.rput_async(results.ptr(next + i), &out[i], 100);
  ep.flush();  // every put complete
  rt.barrier();
  const double from_prev = results.local()[999];

  // A buffer allocated at the last rank by rank 0, filled by everyone.
  objects::GlobalPtr<uint64_t> shared;
  if (me == 0) shared = ep.allocate<uint64_t>(n - 1, static_cast<size_t>(n));
  shared = rt.bootstrap().allgather_value(shared)[0];
  ep.rput(shared + me, static_cast<uint64_t>(me * me));
  rt.barrier();
  uint64_t squares = 0;
  for (int r = 0; r < n; ++r) squares += ep.rget(shared + r);
  rt.barrier();
  if (me == 0) ep.deallocate(shared);

  std::printf("rank %d: counter %llu (expected %d), last result from rank %d: %.3f, sum of squares %llu\n", me,
              static_cast<unsigned long long>(mine), n * (n + 1) / 2, (me + n - 1) % n, from_prev,
              static_cast<unsigned long long>(squares));
  const uint64_t want_squares = static_cast<uint64_t>((n - 1) * n * (2 * n - 1) / 6);
  const bool ok = mine == static_cast<uint64_t>(n * (n + 1) / 2) && from_prev == (me + n - 1) % n + 0.999 && squares == want_squares;
  return ok ? 0 : 1;
}
