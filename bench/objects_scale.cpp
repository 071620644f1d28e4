// bench_objects' node sweep: the measured operations beside their predictions, how busy the host was,
// where Auto put its maps, and the projection.
#include "bench/objects_scale.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "loom/objects/calibrate.hpp"
#include "loom/objects/hash_map.hpp"
#include "loom/objects/projection.hpp"

namespace loom::bench {

using objects::Level;
using objects::Op;
using objects::Policy;

namespace {

constexpr Policy kPolicies[] = {Policy::OneSided, Policy::OwnerInvoked, Policy::Cached, Policy::Auto};
constexpr Op kPhases[] = {Op::HashInsert, Op::HashFind};
constexpr objects::Workload kWorkload{0.5, Level::Atomic};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);  // every thread of the process: its wire engine and the calls it served too
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// One phase: microseconds per operation (the issuing processes' mean) and how busy the host was
// (the processes' CPU time, every thread's, over the cores and the phase's time: near 1, the
// host's cores, not the wire, set the pace).
struct Figure {
  double us = 0, busy = 0;
};

// Every process issues operations, or rank 0 alone while the others serve in the barrier.
enum class Issuers { Every, One };

Figure run_phase(objects::Context& ctx, objects::HashMap<uint64_t, uint64_t>& m, Op op, Issuers who, size_t ops, std::mt19937_64& rng) {
  const uint64_t p = static_cast<uint64_t>(ctx.size()), me = static_cast<uint64_t>(ctx.rank());
  const bool issues = who == Issuers::Every || me == 0;
  uint64_t sink = 0;
  ctx.barrier();
  const double cpu0 = cpu_seconds();
  const auto t0 = clk::now();
  // Fresh keys to insert: with rank 0 alone, past the ones every process inserted before.
  const uint64_t first = who == Issuers::One ? ops * p : 0;
  if (issues && op == Op::HashInsert)
    for (size_t i = 0; i < ops; ++i) m.insert(first + i * p + me, i);
  else if (issues)
    for (size_t i = 0; i < ops; ++i) sink += m.find(rng() % (ops * p)).value_or(0);
  const double us = seconds_since(t0) * 1e6 / static_cast<double>(ops);
  ctx.barrier();
  const double wall = seconds_since(t0), cpu = cpu_seconds() - cpu0;
  if (sink == 42) std::printf(" ");
  struct Mine {
    double us, cpu, wall;
  };
  Figure f;
  double cpu_all = 0, wall_max = 0;
  for (const Mine& x : ctx.runtime().bootstrap().allgather_value(Mine{issues ? us : 0, cpu, wall}))
    f.us += x.us, cpu_all += x.cpu, wall_max = std::max(wall_max, x.wall);
  f.us /= who == Issuers::Every ? static_cast<double>(p) : 1.0;
  f.busy = cpu_all / (std::max(1u, std::thread::hardware_concurrency()) * wall_max);
  return f;
}

std::string cell(Issuers who, Op op, Policy p) {
  return std::string(who == Issuers::Every ? "scale/" : "scale-one/") + std::string(objects::name(op)) + "/" + std::string(objects::name(p));
}

double predicted(const objects::Placements& c, objects::Scale s, Op op, Policy p) {
  if (p == Policy::Auto) return objects::predict_auto_at(c, s, Op::HashInsert, Op::HashFind, op, kWorkload, Level::Atomic);
  return objects::predict_at(c, s, op, p, Level::Atomic);
}

void report_measured(const objects::Placements& c, objects::Scale s, std::map<std::string, std::vector<Figure>>& figures, std::vector<Row>& rows) {
  std::printf("\nnode sweep, %d nodes x %d processes, keys spread over every part; scale/: every process issues, scale-one/: rank 0 alone\n"
              "us per operation and process, median of rounds; busy: the processes' CPU time over the host's cores and the phase\n",
              s.nodes, s.ranks_per_node);
  std::printf("%-36s %9s %9s %8s %6s\n", "", "measured", "model", "ratio", "busy");
  for (Issuers who : {Issuers::Every, Issuers::One})
    for (Op op : kPhases)
      for (Policy p : kPolicies) {
        std::vector<double> us, busy;
        for (const Figure& f : figures[cell(who, op, p)]) us.push_back(f.us), busy.push_back(f.busy);
        const double m = median(us), model = predicted(c, s, op, p), b = median(busy);
        const std::string v = cell(who, op, p);
        rows.push_back({v, 1, "us", m, "us"});
        rows.push_back({v, 1, "model_us", model, "us"});
        rows.push_back({v, 1, "over_model", m / model, "x"});
        rows.push_back({v, 1, "host_busy", b, ""});
        std::printf("%-36s %9.2f %9.2f %8.2f %6.2f\n", v.c_str(), m, model, m / model, b);
      }
}

// Where Auto put its maps (a region, or the owners) beside where the model puts them.
void report_placement(const objects::Placements& c, objects::Scale s, const std::vector<bool>& auto_cached, std::vector<Row>& rows) {
  const bool model_cached = objects::prefer_cached(objects::deciding(c, s), Op::HashInsert, Op::HashFind, kWorkload);
  const double share = static_cast<double>(std::count(auto_cached.begin(), auto_cached.end(), true)) / static_cast<double>(std::max<size_t>(1, auto_cached.size()));
  rows.push_back({"scale/auto-placement", 1, "cached_share", share, ""});
  rows.push_back({"scale/auto-placement", 1, "model_cached", model_cached ? 1.0 : 0.0, ""});
  std::printf("Auto put %.0f%% of its maps in a region; the model puts them %s\n", 100 * share, model_cached ? "in a region" : "at the owners");
}

// Across a wire from 2 nodes on (the components of a process's own part were measured with the
// others across it); a job on one node projects only itself.
void report_projection(const objects::Placements& c, objects::Scale s, std::vector<Row>& rows) {
  std::printf("\nprojection (the model, %d processes a node): the job's operations per second\n%-34s", s.ranks_per_node, "nodes");
  std::vector<int> nodes{1};
  if (s.nodes > 1) nodes = {2, 4, 8, 16, 32, 64};
  for (int n : nodes) std::printf(" %9d", n);
  std::printf("\n");
  for (Op op : kPhases)
    for (Policy p : kPolicies) {
      const std::string v = "scale-model/" + std::string(objects::name(op)) + "/" + std::string(objects::name(p));
      std::printf("%-34s", v.c_str());
      for (int n : nodes) {
        const objects::Scale at{n, s.ranks_per_node};
        const double us = predicted(c, at, op, p);
        rows.push_back({v, static_cast<size_t>(n), "ops_per_s", objects::ops_per_s(at, us), "ops/s"});
        rows.push_back({v, static_cast<size_t>(n), "us", us, "us"});
        std::printf(" %9.3g", objects::ops_per_s(at, us));
      }
      std::printf("\n");
    }
}

}  // namespace

void scale_rows(objects::Context& ctx, const ScaleOptions& o, std::vector<Row>& rows) {
  const objects::JobLayout l = objects::job_layout(ctx);
  const objects::Placements c = objects::measure_placements(ctx, l, 1000);
  const size_t p = static_cast<size_t>(ctx.size()), keys = o.ops * p;
  std::map<std::string, std::vector<Figure>> figures;
  std::vector<bool> auto_cached;  // where each Auto map put its data
  std::mt19937_64 rng(static_cast<uint64_t>(ctx.rank()) * 7919 + 3);
  for (int round = 0; round < o.rounds; ++round)
    for (size_t j = 0; j < std::size(kPolicies); ++j) {
      const Policy pol = kPolicies[(j + static_cast<size_t>(round)) % std::size(kPolicies)];
      for (Issuers who : {Issuers::Every, Issuers::One}) {
        // A fresh map each time, an eighth full at most: an insert finds its bucket free, as the
        // model has it (no collisions).
        objects::HashMap<uint64_t, uint64_t> m(ctx, 16 * keys, pol, kWorkload);
        if (pol == Policy::Auto) auto_cached.push_back(m.placement() == Policy::Cached);
        if (who == Issuers::One)  // the keys rank 0 finds are there
          for (size_t i = 0; i < o.ops; ++i) m.insert(i * p + static_cast<size_t>(ctx.rank()), i);
        for (Op op : kPhases) figures[cell(who, op, pol)].push_back(run_phase(ctx, m, op, who, o.ops, rng));
      }
    }
  if (ctx.rank() != 0) return;
  report_measured(c, l.scale, figures, rows);
  report_placement(c, l.scale, auto_cached, rows);
  report_projection(c, l.scale, rows);
}

}  // namespace loom::bench
