// Placement (dsm/runtime/placement.hpp) on machines of stated shapes: which zone and core each
// thread of each process of a host gets under map-by core, zone and spread — seed 000's
// configurations (one process per zone, a process's threads over both zones) on its machines'
// shape (2 zones x 8 cores) and smaller ones; bad shapes and places are errors.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/placement.hpp"

using namespace loom::runtime;

namespace {

MachineShape zones_of(int zones, int cores_each) {
  MachineShape m;
  for (int z = 0, c = 0; z < zones; ++z) {
    m.zone_cores.emplace_back();
    for (int k = 0; k < cores_each; ++k) m.zone_cores.back().push_back(c++);
  }
  m.check();
  return m;
}

// Every (zone, core) the threads of `procs` processes of `threads` threads get.
std::vector<std::vector<ThreadPlace>> all(const MachineShape& m, MapBy by, int procs, int threads) {
  std::vector<std::vector<ThreadPlace>> out;
  for (int r = 0; r < procs; ++r) {
    out.emplace_back();
    for (int i = 0; i < threads; ++i) out.back().push_back(place_thread(m, by, {r, procs, threads}, i));
  }
  return out;
}

TEST(Placement, MapByZonePutsEachProcessInItsOwnZone) {
  const MachineShape m = zones_of(2, 8);  // seed 000's machines: 2 zones of 8 cores
  const auto p = all(m, MapBy::Zone, 2, 8);  // its 2x8 configuration
  std::set<int> cores;
  for (int r = 0; r < 2; ++r)
    for (const ThreadPlace& t : p[static_cast<size_t>(r)]) {
      EXPECT_EQ(t.zone, r);
      EXPECT_EQ(m.zone_of_core(t.core), r);
      cores.insert(t.core);
    }
  EXPECT_EQ(cores.size(), 16u) << "every core once";
  EXPECT_EQ(process_zone(m, MapBy::Zone, {1, 2, 8}, false), 1) << "unpinned, the memory still follows the rule";
}

TEST(Placement, MapByZoneFillsAZoneWithTheProcessesItHolds) {
  const MachineShape m = zones_of(2, 4);
  const auto p = all(m, MapBy::Zone, 4, 2);  // 4 processes x 2 threads: two per zone
  std::set<int> cores;
  for (int r = 0; r < 4; ++r)
    for (const ThreadPlace& t : p[static_cast<size_t>(r)]) {
      EXPECT_EQ(t.zone, r % 2);
      cores.insert(t.core);
    }
  EXPECT_EQ(cores.size(), 8u);
  EXPECT_EQ(p[2][0].core, 2) << "after rank 0's two cores in zone 0";
}

TEST(Placement, MapBySpreadPutsAProcesssThreadsOverEveryZone) {
  const MachineShape m = zones_of(2, 8);
  const auto one = all(m, MapBy::Spread, 1, 16);  // seed 000's configuration 16: 8 threads a zone
  int in_zone[2] = {0, 0};
  std::set<int> cores;
  for (const ThreadPlace& t : one[0]) ++in_zone[t.zone], cores.insert(t.core);
  EXPECT_EQ(in_zone[0], 8);
  EXPECT_EQ(in_zone[1], 8);
  EXPECT_EQ(cores.size(), 16u);
  const auto two = all(m, MapBy::Spread, 2, 4);
  cores.clear();
  for (const auto& proc : two)
    for (const ThreadPlace& t : proc) cores.insert(t.core);
  EXPECT_EQ(cores.size(), 8u) << "two processes' threads on distinct cores";
  EXPECT_EQ(process_zone(m, MapBy::Spread, {1, 2, 4}, true), 1);
}

TEST(Placement, MapByCoreTakesTheCoresInOrderAsBefore) {
  const MachineShape m = zones_of(2, 2);
  const auto p = all(m, MapBy::Core, 2, 2);
  EXPECT_EQ(p[0][0].core, 0);
  EXPECT_EQ(p[0][1].core, 1);
  EXPECT_EQ(p[1][0].core, 2);
  EXPECT_EQ(p[1][1].zone, 1);
  EXPECT_EQ(process_zone(m, MapBy::Core, {1, 2, 2}, true), 1);
  EXPECT_EQ(process_zone(m, MapBy::Core, {1, 2, 2}, false), 0) << "unpinned under core: zone 0";
  EXPECT_EQ(place_thread(m, MapBy::Core, {1, 2, 2}, 3).core, 1) << "past the cores: wraps";
}

TEST(Placement, OneZoneMachinesPutEverythingInZoneZero) {
  const MachineShape m = zones_of(1, 2);  // this CI machine
  for (MapBy by : {MapBy::Core, MapBy::Zone, MapBy::Spread})
    for (const auto& proc : all(m, by, 4, 3))
      for (const ThreadPlace& t : proc) EXPECT_EQ(t.zone, 0);
}

TEST(Placement, NamesAndBadShapesAndPlacesAreClearErrors) {
  for (MapBy by : {MapBy::Core, MapBy::Zone, MapBy::Spread}) EXPECT_EQ(parse_map_by(name(by)), by);
  EXPECT_THROW(parse_map_by("numa"), loom::Error);
  MachineShape empty;
  EXPECT_THROW(empty.check(), loom::Error);
  MachineShape hole;
  hole.zone_cores = {{0, 1}, {}};
  EXPECT_THROW(hole.check(), loom::Error);
  MachineShape twice;
  twice.zone_cores = {{0, 1}, {1}};
  EXPECT_THROW(twice.check(), loom::Error);
  const MachineShape m = zones_of(2, 2);
  EXPECT_THROW(place_thread(m, MapBy::Zone, {2, 2, 1}, 0), loom::Error);
  EXPECT_THROW(place_thread(m, MapBy::Zone, {0, 1, 0}, 0), loom::Error);
  EXPECT_THROW(place_thread(m, MapBy::Zone, {0, 1, 1}, -1), loom::Error);
  EXPECT_NE(describe(m, MapBy::Zone, {1, 2, 2}, true).find("zone 1 of 2"), std::string::npos);
}

}  // namespace
