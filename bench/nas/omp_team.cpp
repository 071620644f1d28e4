#include "bench/nas/omp_team.hpp"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

namespace loom::nas {
namespace {

// What the threads share: the allocations. They come from malloc, so on Loom's OpenMP layer
// (nas_loomp) they lie in its shared heap, and with libgomp in this process's memory.
struct OmpShared {
  void* last = nullptr;
  std::vector<void*> blocks;
  OmpShared() = default;
  OmpShared(const OmpShared&) = delete;
  OmpShared& operator=(const OmpShared&) = delete;
  ~OmpShared() {
    for (void* p : blocks) std::free(p);
  }
};

constexpr size_t kPage = 4096;

class OmpTeam final : public Team {
 public:
  OmpTeam(int thread, int threads, OmpShared& sh) : Team(0, 1, thread, threads), sh_(sh) { make_slots(); }
  std::string backend() const override { return "omp"; }
  void barrier() override {
#pragma omp barrier
  }

 protected:
  // Zero, as the Loom back end's region memory is; each thread zeroes (first touches) its part.
  void* allocate(size_t bytes, size_t /*piece*/) override {
#pragma omp barrier
    if (thread() == 0) {
      void* p = std::aligned_alloc(kPage, (bytes + kPage - 1) / kPage * kPage);
      if (p == nullptr) {
        std::fprintf(stderr, "nas: cannot allocate %zu bytes\n", bytes);
        std::exit(2);
      }
      sh_.blocks.push_back(p);
      sh_.last = p;
    }
#pragma omp barrier
    const Range mine = part(bytes, kPage);
    std::memset(static_cast<char*>(sh_.last) + mine.lo, 0, mine.size());
#pragma omp barrier
    return sh_.last;
  }

 private:
  OmpShared& sh_;
};

}  // namespace

Result run_on_omp(const Kernel& kernel, char cls, int threads) {
  kernel.shared_bytes(cls, threads);  // throws on a bad class, before the threads start
  OmpShared sh;
  Result result;
#pragma omp parallel num_threads(threads)
  {
    try {
      OmpTeam team(omp_get_thread_num(), omp_get_num_threads(), sh);
      Result r = kernel.run(team, cls);
      if (team.leader()) result = r;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nas: OpenMP thread %d: %s\n", omp_get_thread_num(), e.what());
      std::_Exit(2);
    }
  }
  return result;
}

}  // namespace loom::nas
