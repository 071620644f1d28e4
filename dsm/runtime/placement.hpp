#pragma once
// Where a process's threads run and which NUMA zone its memory comes from (seed 000, section 3:
// "one process per (zone, endpoint)", configurations m x p x t with each process in its own
// zone), as a pure function of the machine's shape, the process's place among the ranks on its
// host and its thread count. LOOM_MAP_BY (loomrun --map-by) chooses the rule:
//
//   core    the host's cores in order: process r's threads on cores r*t, r*t+1, ... (wrapping);
//           the process's zone is that of its first thread's core (zone 0 when not pinning)
//   zone    process r in zone r mod Z, its threads on that zone's cores, after those of the
//           processes before it in the zone (wrapping inside the zone)
//   spread  process r's thread i in zone (r + i) mod Z: a process's threads over every zone
//           (seed 000's one-process configurations of 16 and 32 threads); its zone is that of
//           thread 0
//
// Thread indices past the worker count (service threads, spawned threads) follow the same rule.
#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

enum class MapBy { Core, Zone, Spread };

// "core", "zone", "spread"; anything else is an error naming the choices.
MapBy parse_map_by(std::string_view s);
std::string_view name(MapBy m);

// The host's cores by NUMA zone (logical indices, in the topology's order): every core once,
// every zone with at least one core.
struct MachineShape {
  std::vector<std::vector<int>> zone_cores;
  int zones() const { return static_cast<int>(zone_cores.size()); }
  int cores() const;
  int zone_of_core(int core) const;  // -1 if no zone has it
  void check() const;                // throws loom::Error if the shape is not as stated above
};

struct ProcessPlace {
  int local_rank = 0;  // among the ranks on this host
  int local_size = 1;
  int threads = 1;     // worker threads per process
};

struct ThreadPlace {
  int zone = 0;
  int core = 0;  // logical index
};

// Thread `index` of the process (0: the main thread).
ThreadPlace place_thread(const MachineShape& m, MapBy by, const ProcessPlace& p, int index);
// The zone the process's memory comes from: thread 0's, except under `core` without pinning
// (threads float over the host; zone 0, as before LOOM_MAP_BY existed).
int process_zone(const MachineShape& m, MapBy by, const ProcessPlace& p, bool pinning);

// One line for the log: "zone Z, threads on cores a b c ...".
std::string describe(const MachineShape& m, MapBy by, const ProcessPlace& p, bool pinning);

}  // namespace loom::runtime
