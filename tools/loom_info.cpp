// loom-info: what this build and this machine offer Loom — providers compiled in and usable,
// RDMA devices and ports (or why there are none), NUMA zones and cores, huge pages, and the
// effective LOOM_* settings. Like ucx_info / ibv_devinfo. Run under loomrun it joins the job:
// the first rank of each host reports its host, and rank 0 adds the transport every pair of
// ranks uses (the other ranks print their own row of that).
#include <hwloc.h>
#include <numa.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "loom/coherence/settings.hpp"
#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/settings_check.hpp"
#include "loom/dsm/common/system.hpp"
#include "loom/version.hpp"
#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/region/write_tracking.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/dsm/runtime/transports.hpp"
#include "loom/invoke/settings.hpp"
#include "loom/objects/settings.hpp"
#include "loom/omp/settings.hpp"
#ifdef LOOM_HAVE_VERBS
#include "loom/dsm/fabric/verbs/verbs_provider.hpp"
#endif

namespace {

using loom::settings::Setting;
using loom::settings::Table;

constexpr Table kTables[] = {loom::settings::dsm::kTable, loom::invoke::settings::kTable, loom::coherence::settings::kTable,
                             loom::objects::settings::kTable, loom::omp::settings::kTable};

// Every setting of every layer with the value in effect; a malformed value is shown with the
// error a program would stop with. LOOM_* variables no table declares are named; a setting's
// former name is refused as every Loom program refuses it, naming the new one (false).
bool print_settings() {
  bool fine = true;
  std::printf("\n## settings (docs/environment.md)\n");
  for (const Table& t : kTables) {
    std::printf("  [%s]\n", t.layer);
    for (const Setting* s : t.settings) {
      auto v = loom::settings::raw(*s);
      std::string shown = v ? *v : (*s->fallback ? s->fallback : s->type == loom::settings::Type::String ? "(unset)" : "(computed)");
      std::string note = v ? "" : "  (default)";
      if (v) {
        try {
          loom::settings::validate(*s, *v);
        } catch (const std::exception& e) {
          note = std::string("  INVALID: ") + e.what();
        }
      }
      std::printf("  %-24s %-14s %-6s %s%s\n", s->name, shown.c_str(), loom::settings::type_name(s->type),
                  loom::settings::accepted(*s).c_str(), note.c_str());
    }
  }
  for (const auto& [k, v] : loom::settings::loom_environment()) {
    bool known = false;
    for (const Table& t : kTables)
      for (const Setting* s : t.settings) known = known || k == s->name;
    if (known) continue;
    const char* renamed_to = nullptr;
    for (const loom::settings::Renamed& r : loom::settings::registered_renamed())
      if (k == r.old_name) renamed_to = r.new_name;
    if (renamed_to) {
      std::printf("  %-24s %s  REFUSED: %s was renamed %s: set that instead\n", k.c_str(), v.c_str(), k.c_str(), renamed_to);
      std::fprintf(stderr, "loom-info: %s was renamed %s: set that instead (docs/environment.md)\n", k.c_str(), renamed_to);
      fine = false;
    } else {
      std::printf("  %-24s %s  (set, but not a Loom setting)\n", k.c_str(), v.c_str());
    }
  }
  return fine;
}

long read_long(const std::string& path) {
  std::ifstream f(path);
  long v = -1;
  f >> v;
  return v;
}

std::string hugetlbfs_mounts() {
  std::string out;
  for (const std::string& dir : loom::sys::hugetlbfs_mounts()) out += (out.empty() ? "" : ", ") + dir;
  return out.empty() ? "none" : out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf("usage: loom-info\n");
    return std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help" ? 0 : 2;
  }
  // Under loomrun: a rank of the job.
  std::optional<loom::Runtime> rt;
  if (std::getenv("LOOM_RANK") != nullptr) rt.emplace(argc, argv);
  if (rt && rt->bootstrap().local_rank() != 0) {
    std::printf("%s", loom::runtime::describe_transports(rt->layout(), rt->provider(), rt->rank()).c_str());
    return 0;
  }
  std::printf("# Loom %s on %s\n\n", LOOM_BUILD_ID, rt ? rt->hostname().c_str() : "this host");

  std::printf("## providers\n");
  for (const auto& p : loom::fabric::compiled_providers()) {
    std::string state = "usable";
#ifdef LOOM_HAVE_VERBS
    if (p == "verbs") {
      std::string why;
      auto devs = loom::fabric::verbs::survey(&why);
      bool active = false;
      for (auto& d : devs)
        for (auto& port : d.ports) active = active || port.active;
      state = active ? "usable" : "not usable here: " + (devs.empty() ? why : std::string("no active port"));
    }
#endif
    if (p == "shm") state = "usable (processes on this host)";
    if (p == "shm+verbs") state = "shm within a host, verbs between hosts (LOOM_PROVIDER=auto when ranks span hosts)";
    std::printf("  %-9s %s\n", p.c_str(), state.c_str());
  }
#ifdef LOOM_HAVE_PMIX
  std::printf("  bootstraps: embedded (loomrun -n), rendezvous (loomrun --hosts, --rendezvous), pmix (mpirun, srun --mpi=pmix)\n");
#else
  std::printf("  bootstraps: embedded (loomrun -n), rendezvous (loomrun --hosts, --rendezvous); pmix not compiled in\n");
#endif

  std::printf("\n## RDMA devices\n");
#ifdef LOOM_HAVE_VERBS
  std::string why;
  auto devs = loom::fabric::verbs::survey(&why);
  if (devs.empty()) std::printf("  none: %s\n", why.c_str());
  for (const auto& d : devs) {
    std::printf("  %s: max_qp %u, max_qp_wr %u, max_cqe %u, max_mr %u, max_mr_size %llu, max_sge %u, atomics %s\n",
                d.name.c_str(), d.max_qp, d.max_qp_wr, d.max_cqe, d.max_mr,
                static_cast<unsigned long long>(d.max_mr_size), d.max_sge, d.atomic_cap.c_str());
    for (const auto& p : d.ports) {
      std::printf("    port %d: %s, %s, lid %u, mtu %s\n", p.port, p.state.c_str(), p.link_layer.c_str(), p.lid, p.mtu.c_str());
      for (const auto& g : p.gids) std::printf("      gid %s\n", g.c_str());
    }
  }
#else
  std::printf("  the verbs provider is not compiled in (libibverbs-dev was missing)\n");
#endif

  std::printf("\n## topology\n");
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    int zones = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    std::printf("  NUMA zones %d, packages %d, cores %d, hardware threads %d\n", zones,
                hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
                hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    for (int z = 0; z < zones; ++z) {
      hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(z));
      char cpus[256];
      hwloc_bitmap_list_snprintf(cpus, sizeof cpus, n->cpuset);
      std::printf("    zone %d: cpus %s, memory %llu MiB\n", z, cpus,
                  static_cast<unsigned long long>(n->attr->numanode.local_memory >> 20));
    }
    hwloc_topology_destroy(topo);
  }
  std::printf("  libnuma: %s\n", numa_available() >= 0 ? "available" : "not available (single zone assumed)");

  std::printf("\n## huge pages\n");
  std::printf("  2 MiB pages: %ld total, %ld free; 1 GiB pages: %ld total, %ld free\n",
              read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
              read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"),
              read_long("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"),
              read_long("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"));
  std::printf("  hugetlbfs mounts: %s\n", hugetlbfs_mounts().c_str());

  std::printf("\n## write tracking (docs/coherence.md, \"Write tracking\")\n");
  std::printf("  in use: %s (a write to a read-only block faults; the handler twins it)\n", loom::region::kWriteTrackingInUse);
  const loom::region::KernelWriteTracking k = loom::region::probe_kernel_write_tracking();
  std::printf("  userfaultfd asynchronous write protection + PAGEMAP_SCAN: %s%s\n", k.uffd_wp_async ? "available" : "not available: ",
              k.why_not.c_str());

  const bool settings_fine = print_settings();
  if (rt && rt->rank() == 0) {
    std::printf("\n## transports (%d ranks on %d hosts)\n", rt->size(), rt->machines());
    std::printf("%s", loom::runtime::describe_transports(rt->layout(), rt->provider(), 0).c_str());
  }
  return settings_fine ? 0 : 1;
}
