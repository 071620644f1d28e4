#include "bench/nas/omp_team.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>
#include <vector>

namespace loom::nas {
namespace {

// What the threads share: the allocations (anonymous mappings, zero until touched).
struct OmpShared {
  void* last = nullptr;
  std::vector<std::pair<void*, size_t>> maps;
  OmpShared() = default;
  OmpShared(const OmpShared&) = delete;
  OmpShared& operator=(const OmpShared&) = delete;
  ~OmpShared() {
    for (auto& [p, n] : maps) munmap(p, n);
  }
};

class OmpTeam final : public Team {
 public:
  OmpTeam(int thread, int threads, OmpShared& sh) : Team(0, 1, thread, threads), sh_(sh) { make_slots(); }
  std::string backend() const override { return "omp"; }
  void barrier() override {
#pragma omp barrier
  }

 protected:
  void* allocate(size_t bytes, size_t /*piece*/) override {
#pragma omp barrier
    if (thread() == 0) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        std::perror("nas: mmap");
        std::exit(2);
      }
      sh_.maps.emplace_back(p, bytes);
      sh_.last = p;
    }
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
