#include "loom/dsm/runtime/placement.hpp"

#include <algorithm>
#include <sstream>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime {

MapBy parse_map_by(std::string_view s) {
  if (s == "core") return MapBy::Core;
  if (s == "zone") return MapBy::Zone;
  if (s == "spread") return MapBy::Spread;
  fail("LOOM_MAP_BY='", std::string(s), "' must be core, zone or spread");
}

std::string_view name(MapBy m) {
  switch (m) {
    case MapBy::Core: return "core";
    case MapBy::Zone: return "zone";
    case MapBy::Spread: return "spread";
  }
  return "?";
}

int MachineShape::cores() const {
  int n = 0;
  for (const auto& z : zone_cores) n += static_cast<int>(z.size());
  return n;
}

int MachineShape::zone_of_core(int core) const {
  for (size_t z = 0; z < zone_cores.size(); ++z)
    if (std::find(zone_cores[z].begin(), zone_cores[z].end(), core) != zone_cores[z].end()) return static_cast<int>(z);
  return -1;
}

void MachineShape::check() const {
  if (zone_cores.empty()) fail("placement: a machine with no NUMA zone");
  std::vector<int> all;
  for (size_t z = 0; z < zone_cores.size(); ++z) {
    if (zone_cores[z].empty()) fail("placement: NUMA zone ", z, " has no core");
    all.insert(all.end(), zone_cores[z].begin(), zone_cores[z].end());
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] != static_cast<int>(i)) fail("placement: the zones' cores are not the cores 0..", all.size() - 1, " once each");
}

namespace {
void check_place(const ProcessPlace& p, int index) {
  if (p.local_size < 1 || p.local_rank < 0 || p.local_rank >= p.local_size) fail("placement: local rank ", p.local_rank, " of ", p.local_size);
  if (p.threads < 1) fail("placement: ", p.threads, " threads per process");
  if (index < 0) fail("placement: thread index ", index, " is negative");
}
int wrap(long long i, size_t n) { return static_cast<int>(i % static_cast<long long>(n)); }
}  // namespace

ThreadPlace place_thread(const MachineShape& m, MapBy by, const ProcessPlace& p, int index) {
  check_place(p, index);
  const long long r = p.local_rank, t = p.threads, i = index;
  switch (by) {
    case MapBy::Core: {
      const int core = wrap(r * t + i, static_cast<size_t>(m.cores()));
      return {std::max(0, m.zone_of_core(core)), core};
    }
    case MapBy::Zone: {
      const int z = wrap(r, m.zone_cores.size());
      const long long before = r / m.zones();  // processes earlier in the same zone
      const auto& cores = m.zone_cores[static_cast<size_t>(z)];
      return {z, cores[static_cast<size_t>(wrap(before * t + i, cores.size()))]};
    }
    case MapBy::Spread: {
      const int z = wrap(r + i, m.zone_cores.size());
      // This zone's threads of the processes before, then this one's: thread i is the
      // (i / Z)-th of this process's threads in zone z.
      const long long per_zone = (t + m.zones() - 1) / m.zones();
      const auto& cores = m.zone_cores[static_cast<size_t>(z)];
      return {z, cores[static_cast<size_t>(wrap(r * per_zone + i / m.zones(), cores.size()))]};
    }
  }
  fail("placement: unknown rule");
}

int process_zone(const MachineShape& m, MapBy by, const ProcessPlace& p, bool pinning) {
  if (by == MapBy::Core && !pinning) return 0;
  return place_thread(m, by, p, 0).zone;
}

std::string describe(const MachineShape& m, MapBy by, const ProcessPlace& p, bool pinning) {
  std::ostringstream o;
  o << "map-by " << name(by) << ": zone " << process_zone(m, by, p, pinning) << " of " << m.zones() << ", ";
  if (!pinning) o << "threads not pinned (would be cores";
  else o << "threads on cores";
  for (int i = 0; i < p.threads; ++i) o << ' ' << place_thread(m, by, p, i).core;
  if (!pinning) o << ')';
  return o.str();
}

}  // namespace loom::runtime
