// Shared regions: a histogram built by every process with plain loads and stores, under locks,
// then read by everyone after a barrier; and a per-process linked object read remotely through
// an explicit accessor.
// Run: loomrun -n 4 shared_regions        (any policy: LOOM_COHERENCE_POLICY=fixed-dir loomrun ...)
#include <cstdio>
#include <cstring>
#include <vector>

#include "loom/coherence/space.hpp"

using namespace loom;

struct Bin {
  uint64_t count;
  uint64_t sum;
};

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  coherence::Space dsm(rt);                           // collective
  region::Region& r = dsm.create_region(16 << 20);  // collective: the same address everywhere
  constexpr int kBins = 64;
  Bin* hist = r.new_array<Bin>(kBins);              // collective, zeroed
  std::vector<coherence::Lock> locks;
  for (int i = 0; i < 8; ++i) locks.push_back(dsm.make_lock());  // collective

  // Every process adds its numbers; a bin is guarded by lock (bin % 8).
  for (uint64_t x = static_cast<uint64_t>(rt.rank()); x < 10000; x += static_cast<uint64_t>(rt.size())) {
    int b = static_cast<int>((x * 2654435761u) % kBins);
    coherence::Lock& l = locks[static_cast<size_t>(b % 8)];
    l.lock();
    hist[b].count += 1;  // plain stores: the first one faults, twins the block
    hist[b].sum += x;
    l.unlock();          // release: this process's changes become the blocks' new versions
  }
  dsm.barrier();         // every process's writes are visible to every process now

  uint64_t n = 0, sum = 0;
  for (int b = 0; b < kBins; ++b) n += hist[b].count, sum += hist[b].sum;

  // A process's own object, built in its local arena and read by others without faults.
  struct Note {
    int rank;
    char text[60];
  };
  Note* mine = r.make_local<Note>();
  mine->rank = rt.rank();
  std::snprintf(mine->text, sizeof mine->text, "hello from rank %d", rt.rank());
  uint64_t addr = reinterpret_cast<uint64_t>(mine);
  auto all = rt.bootstrap().allgather_value(addr);  // every rank's object
  dsm.barrier();
  uint64_t next_addr = all[static_cast<size_t>((rt.rank() + 1) % rt.size())];
  const Note* next = dsm.reading(reinterpret_cast<const Note*>(next_addr));  // declared: no fault

  std::printf("rank %d (%s): %llu numbers summing to %llu; next says \"%s\"\n", rt.rank(), dsm.policy().name().c_str(),
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(sum), next->text);
  bool ok = n == 10000 && sum == 10000ull * 9999 / 2 && next->rank == (rt.rank() + 1) % rt.size();
  dsm.barrier();
  r.destroy_local(mine);
  dsm.destroy_region(r);
  return ok ? 0 : 1;
}
