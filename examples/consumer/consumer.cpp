// A whole Loom program, built outside Loom's tree (CMakeLists.txt here; or with pkg-config:
// g++ -std=c++20 consumer.cpp $(pkg-config --cflags --libs loom)). Run: loomrun -n 2 ./consumer
//
// Every process fills its share of an array in a shared region with plain stores; after the
// shared-region barrier each reads the whole array. Then each sends the sum it computed to the
// next process by a remote call, and checks the one it received.
#include <loom/loom.hpp>

#include <cstdio>

namespace {
std::atomic<int> g_calls{0};
std::atomic<uint64_t> g_received{0};
}  // namespace

int main(int argc, char** argv) {
  loom::Runtime rt(argc, argv);              // collective: every process of the job
  loom::coherence::Space dsm(rt);            // shared regions
  loom::invoke::Invoker inv(rt);             // remote invocation
  const int me = rt.rank(), n = rt.size();

  constexpr size_t kCount = 1 << 16;
  loom::region::Region& region = dsm.create_region(4 << 20);     // same address everywhere
  uint64_t* values = region.new_array<uint64_t>(kCount);       // zeroed, collective
  for (size_t i = static_cast<size_t>(me); i < kCount; i += static_cast<size_t>(n)) values[i] = i;
  dsm.barrier();                             // every process's stores are visible after it

  uint64_t sum = 0;
  for (size_t i = 0; i < kCount; ++i) sum += values[i];
  const uint64_t expected = uint64_t{kCount} * (kCount - 1) / 2;

  // The next process runs the lambda; its captures travel with the call.
  loom::invoke::call(loom::invoke::Thread{(me + 1) % n, 0}, [sum] {
    g_received = sum;
    g_calls.fetch_add(1);
  });
  inv.barrier();                             // every call made before it has run when it returns

  std::printf("rank %d of %d (Loom %s): sum %llu, received %llu\n", me, n, LOOM_VERSION_STRING,
              static_cast<unsigned long long>(sum), static_cast<unsigned long long>(g_received.load()));
  dsm.barrier();                             // nobody destroys the region while another reads it
  dsm.destroy_region(region);
  return sum == expected && g_received.load() == expected && g_calls.load() == 1 ? 0 : 1;
}
