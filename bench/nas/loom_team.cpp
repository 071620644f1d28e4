#include "bench/nas/loom_team.hpp"

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

namespace loom::nas {

const char* const DsmCounters::kNames[kCount] = {"faults", "read_misses", "revalidations", "invalidations", "bytes_fetched", "notices", "twins", "released_blocks", "exclusive_claims", "downgrades"};

size_t block_for_piece(size_t piece) {
  if (piece == 0) return kSmallestBlock;
  return std::clamp(piece & (~piece + 1), kSmallestBlock, kLargestBlock);
}

namespace {

using coherence::Space;

DsmCounters counters(const coherence::Stats& s) {
  const uint64_t v[DsmCounters::kCount] = {s.faults, s.read_misses, s.revalidations, s.invalidations, s.bytes_fetched, s.notices, s.twins, s.released_blocks, s.exclusive_claims, s.downgrades};
  DsmCounters c;
  for (int i = 0; i < DsmCounters::kCount; ++i) c.v[i] = static_cast<double>(v[i]);
  return c;
}

// What the threads of one process share. Each shared allocation is a region of its own, so
// the coherence layer learns each array's sharing on its own (claims are judged per region).
struct ProcessShared {
  ProcessShared(Space& s, int threads) : space(s), sync(threads) {}
  ProcessShared(const ProcessShared&) = delete;
  ProcessShared& operator=(const ProcessShared&) = delete;
  ~ProcessShared() {  // collective, like the regions' creation
    for (auto it = regions.rbegin(); it != regions.rend(); ++it) space.destroy_region(**it);
  }
  Space& space;
  std::vector<region::Region*> regions;
  std::barrier<> sync;
  void* last = nullptr;
  DsmCounters before, timed;  // thread 0 writes
};

class LoomTeam final : public Team {
 public:
  static constexpr size_t kBlock = kSmallestBlock;  // an array's without a piece
  LoomTeam(Runtime& rt, ProcessShared& ps, int thread) : Team(rt.rank(), rt.size(), thread, rt.threads_per_process()), ps_(ps) { make_slots(); }
  std::string backend() const override { return "loom-" + ps_.space.policy().name(); }
  void barrier() override { ps_.space.barrier(); }
  size_t unit() const override { return kBlock; }

 protected:
  void* allocate(size_t bytes, size_t piece) override {
    ps_.sync.arrive_and_wait();
    if (thread() == 0) {
      const size_t block = block_for_piece(piece);
      region::Region& r = ps_.space.create_region((bytes + block - 1) / block * block + block, block, 0);
      ps_.regions.push_back(&r);
      ps_.last = r.allocate(bytes, block);
    }
    ps_.sync.arrive_and_wait();
    return ps_.last;
  }
  const void* read_view(const void* p, size_t n) override { return ps_.space.declare_read_view(p, n); }
  void read_in_place(const void* p, size_t n) override { ps_.space.declare_read(p, n); }
  void* write_view(void* p, size_t n, bool whole) override {
    if (whole) ps_.space.declare_overwrite(p, n);
    else ps_.space.declare_write(p, n);
    return p;
  }
  void timed_section(bool starting) override {
    if (thread() != 0) return;
    const DsmCounters now = counters(ps_.space.stats());
    for (int i = 0; i < DsmCounters::kCount; ++i) {
      if (starting) ps_.before.v[i] = now.v[i];
      else ps_.timed.v[i] = now.v[i] - ps_.before.v[i];
    }
  }

 private:
  ProcessShared& ps_;
};

LoomRun run_member(Runtime& rt, ProcessShared& ps, const Kernel& kernel, char cls, int thread) {
  LoomTeam team(rt, ps, thread);
  LoomRun run;
  run.result = kernel.run(team, cls);
  if (thread == 0) run.counters = ps.timed;
  team.sum(run.counters.v, DsmCounters::kCount);
  // Member 0's verdict for everyone (IS counts its partial checks at member 0).
  run.result.verified = team.sum(team.leader() && run.result.verified ? 1.0 : 0.0) == 1.0;
  return run;
}

// All the kernel's shared arrays and the sums' slots: what the Space reserves room for.
size_t shared_bytes(const Kernel& kernel, char cls, const Runtime& rt) {
  const size_t members = static_cast<size_t>(rt.size()) * static_cast<size_t>(rt.threads_per_process());
  return kernel.shared_bytes(cls, static_cast<int>(members)) + 2 * members * Team::kMaxSum * sizeof(double) + (size_t{1} << 20);
}

}  // namespace

LoomRun run_on_loom(Runtime& rt, const Kernel& kernel, char cls, const coherence::Config& config) {
  const size_t bytes = shared_bytes(kernel, cls, rt);  // throws on a bad class, before anything collective
  coherence::Config cfg = config;
  if (cfg.reserve < bytes + (size_t{1} << 30)) cfg.reserve = bytes + (size_t{1} << 30);
  Space space(rt, cfg);
  std::optional<ProcessShared> ps;
  ps.emplace(space, rt.threads_per_process());
  LoomRun run;
  auto member = [&](int t) {
    try {
      LoomRun r = run_member(rt, *ps, kernel, cls, t);
      if (t == 0) run = r;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nas: rank %d thread %d: %s\n", rt.rank(), t, e.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < rt.threads_per_process(); ++t) threads.push_back(rt.spawn_at(t, "nas-" + std::to_string(t), [&member, t] { member(t); }));
  member(0);
  for (auto& t : threads) t.join();
  ps.reset();  // the regions, collectively
  return run;
}

}  // namespace loom::nas
