// One process's coherence counters as one line (LOOM_COHERENCE_STATS=1 at a Space's end; the
// OpenMP layer's LOOM_OMP_STATS=1): what the protocol did, what it asked of the kernel, and the
// same per interval (a release fence ends one).
#include <cstdio>
#include <string>

#include "loom/coherence/space.hpp"

namespace loom::coherence {

std::string stats_line(const Stats& s) {
  char buf[1024];
  const double per = s.intervals > 0 ? 1.0 / static_cast<double>(s.intervals) : 0.0;
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::snprintf(buf, sizeof buf,
                "faults %llu read_misses %llu bytes_fetched %llu revalidations %llu twins %llu released_blocks %llu "
                "exclusive_claims %llu invalidations %llu notices %llu races %llu run_blocks %llu refreshes %llu intervals %llu | kernel: protect_calls "
                "%llu protect_pages %llu protect_us %.0f beside_running %llu/%llu | per interval: faults %.2f "
                "protect_calls %.2f twins %.2f",
                u(s.faults), u(s.read_misses), u(s.bytes_fetched), u(s.revalidations), u(s.twins), u(s.released_blocks),
                u(s.exclusive_claims), u(s.invalidations), u(s.notices), u(s.races), u(s.run_blocks), u(s.refreshes), u(s.intervals), u(s.protect_calls),
                u(s.protect_pages), static_cast<double>(s.protect_ns) / 1000.0, u(s.protect_beside_running),
                u(s.protect_sampled), static_cast<double>(s.faults) * per, static_cast<double>(s.protect_calls) * per,
                static_cast<double>(s.twins) * per);
  return buf;
}

}  // namespace loom::coherence
