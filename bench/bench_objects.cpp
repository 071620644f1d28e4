// bench_objects: distributed objects under every policy (docs/objects.md; bench/README.md).
//  * global pointers' 8-byte operations beside the same fabric operation posted by hand;
//  * seed 001 Table I's components measured on this fabric (the cost model's inputs): get, put,
//    fad, cas, atomic-read, cas-contended, cas-persistent, fad-single, rpc-rtt, and an owner-invoked
//    call one at a time (write mode);
//  * seed 001's contended queue: every process pushing into one queue at once, one-sided, beside
//    the model with the contended components (bench/objects_contended.hpp);
//  * every container operation x policy x level, one at a time and batched, beside the model;
//  * the mixed workload (90% find) under every policy and Auto; the model's picks;
//  * seed 001's Figure 6: queue push latency as the processes compute between pushes, one-sided,
//    owner-invoked without and with a progress thread, and Auto;
//  * with --only scale: seed 001's node sweep on this job's nodes beside the model's projection
//    (bench/objects_scale.hpp).
// Run: loomrun -n 2 bench_objects [--quick] [--csv FILE] [--only PART].
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/objects_containers.hpp"
#include "bench/objects_contended.hpp"
#include "bench/objects_fig6.hpp"
#include "bench/objects_scale.hpp"
#include "loom/coherence/lane.hpp"
#include "loom/dsm/runtime/connect.hpp"
#include "loom/invoke/calls.hpp"
#include "loom/objects/calibrate.hpp"
#include "loom/objects/context.hpp"

using namespace loom;
using namespace loom::bench;

namespace {

struct Args {
  bool quick = false;
  std::string csv;
  std::string only;  // floors, containers, contended, mixed, fig6 (the components are always measured), scale (only when named)
  bool want(const char* part) const { return only.empty() || only == part; }
  bool scale() const { return only == "scale"; }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--csv" && i + 1 < argc) a.csv = argv[++i];
    else if (s == "--only" && i + 1 < argc) a.only = argv[++i];
    else fail("bench_objects: unknown argument ", s, " (--quick, --csv FILE, --only floors|containers|contended|mixed|fig6|scale)");
  }
  for (const char* part : {"", "floors", "containers", "contended", "mixed", "fig6", "scale"})
    if (a.only == part) return a;
  fail("bench_objects: --only ", a.only, ": floors, containers, contended, mixed, fig6 or scale");
}

template <typename F>
double us_per_op(int iters, F&& f) {
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = clk::now();
    for (int i = 0; i < iters; ++i) f(i);
    t.push_back(seconds_since(t0) / iters * 1e6);
  }
  return median(t);
}

// The floor: one signaled request on a lane, waited for.
struct Floor {
  coherence::Lane lane;
  memory::RDMAMemory buf;
  Floor(Runtime& rt, memory::RDMAMemory scratch) : lane(rt.provider(), rt.size(), scratch), buf(scratch) {
    runtime::connect_all(rt.bootstrap(), lane.queue_pairs());
  }
  void op(fabric::Opcode o, int to, uint32_t len, uint64_t addr, uint32_t rkey) {
    lane.post_mem(to, o, buf, 0, len, addr, rkey, 0, 1);
    lane.wait();
  }
};

// Rank 0 against a word at rank 1: the Endpoint's operation, then the fabric's posted by hand.
void floor_rows(objects::Context& ctx, int iters, std::vector<Row>& rows) {
  Runtime& rt = ctx.runtime();
  objects::Endpoint& ep = ctx.endpoint();
  memory::RDMAMemory scratch = rt.allocator().allocate_chunk(1 << 21);
  {
    Floor floor(rt, scratch);
    objects::GlobalPtr<uint64_t> far;
    if (rt.rank() == 1) {
      far = ep.allocate<uint64_t>(1, 8);
      std::memset(far.local(), 0, 64);
    }
    far = rt.bootstrap().allgather_value(far)[1];
    const RemoteMemoryLocator reg = registration_at(rt, 1, far.address(), 8);
    rt.barrier();
    auto row = [&](const std::string& name, double loom_us, double floor_us) {
      rows.push_back({name + "/endpoint", 8, "us", loom_us, "us"});
      rows.push_back({name + "/floor", 8, "us", floor_us, "us"});
      std::printf("%-16s %9.3f %9.3f %7.2f\n", name.c_str(), loom_us, floor_us, loom_us / floor_us);
    };
    if (rt.rank() == 0) {
      std::printf("global pointers, 8-byte operations, rank 0 -> rank 1 (us per operation; floor: the fabric operation posted by hand)\n");
      std::printf("%-16s %9s %9s %7s\n", "component", "Endpoint", "floor", "ratio");
      uint64_t sink = 0;
      row("get", us_per_op(iters, [&](int) { sink += ep.rget(far); }),
          us_per_op(iters, [&](int) { floor.op(fabric::Opcode::Read, 1, 8, far.address(), reg.rkey); }));
      row("put", us_per_op(iters, [&](int i) { ep.rput(far + 1, static_cast<uint64_t>(i)); }),
          us_per_op(iters, [&](int) { floor.op(fabric::Opcode::Write, 1, 8, far.address() + 8, reg.rkey); }));
      row("fad", us_per_op(iters, [&](int) { sink += ep.fetch_add(far + 2, 1); }),
          us_per_op(iters, [&](int) { floor.op(fabric::Opcode::FetchAdd, 1, 8, far.address() + 16, reg.rkey); }));
      row("cas", us_per_op(iters, [&](int i) { sink += ep.compare_swap(far + 3, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1); }),
          us_per_op(iters, [&](int) { floor.op(fabric::Opcode::CompareSwap, 1, 8, far.address() + 24, reg.rkey); }));
      if (sink == 42424242) std::printf(" ");
    }
    rt.barrier();
    floor.lane.wait();
    rt.barrier();
    if (rt.rank() == 1) ep.deallocate(far);
  }
  rt.allocator().free_chunk(scratch);
}

// One owner-invoked call at a time into rank 1's chunks (the Messengers' write mode), and the
// cost model's components: the inputs every model_us row is computed from.
objects::Components component_rows(objects::Context& ctx, int iters, std::vector<Row>& rows) {
  double write_rate = 0;
  if (ctx.rank() == 0) {
    static std::atomic<uint64_t> ran{0};
    const invoke::Thread dest{1, 0};
    invoke::ReturnSlot<uint64_t> fence;
    for (int i = 0; i < 4 * iters; ++i) invoke::call(dest, [] { ran.fetch_add(1, std::memory_order_relaxed); });  // the channel's chunks
    invoke::call_return(dest, [] { return uint64_t{1}; }, fence);
    fence.get();
    const auto t0 = clk::now();
    for (int i = 0; i < 16 * iters; ++i) invoke::call(dest, [] { ran.fetch_add(1, std::memory_order_relaxed); });
    invoke::call_return(dest, [] { return uint64_t{1}; }, fence);
    fence.get();
    write_rate = 16.0 * iters / seconds_since(t0);
  }
  ctx.process_barrier();
  const objects::Components c = objects::measure_components(ctx, iters);
  if (ctx.rank() != 0) return c;
  const std::pair<const char*, double> comps[] = {{"get", c.get}, {"put", c.put}, {"fad", c.fad}, {"cas", c.cas}, {"atomic-read", c.atomic_read}, {"miss", c.miss}, {"line", c.line}, {"cas-contended", c.cas_contended},
                                                  {"cas-persistent", c.cas_persistent}, {"fad-single", c.fad_single},
                                                  {"rpc-rtt", c.rpc}, {"call-aggregated", c.call}, {"post", c.post}};
  std::printf("\ncost-model components (us; seed 001 Table I on this fabric)\n");
  for (const auto& [name, v] : comps) {
    rows.push_back({name, 8, "us", v, "us"});
    std::printf("%-18s %9.3f\n", name, v);
  }
  rows.push_back({"call-write", 8, "ops_per_s", write_rate, "calls/s"});
  std::printf("%-18s %9.0f calls/s (owner-invoked calls one at a time, write mode)\n", "call-write", write_rate);
  std::printf("handlers: insert %.3f find %.3f/%.3f push %.3f/%.3f pop %.3f/%.3f (atomic/phasal); front end %.3f; bucket line %.3f\n",
              c.h_insert, c.h_find, c.h_find_phasal, c.h_push, c.h_push_phasal, c.h_pop, c.h_pop_phasal, c.op, c.line);
  std::printf("region: atomic %.3f acquire +%.3f release +%.3f (clean +%.3f) write %.3f read %.3f; blocks others write: write %.3f release +%.3f\n",
              c.region_atomic, c.region_acquire, c.region_release, c.region_release_clean, c.region_write, c.region_read, c.region_write_shared,
              c.region_release_shared);
  return c;
}

double value_of(const std::vector<Row>& rows, const std::string& v, size_t size, const std::string& metric) {
  for (const Row& r : rows)
    if (r.variant == v && r.size == size && r.metric == metric) return r.value;
  return 0;
}

void report_targets(const std::vector<Row>& rows, size_t batch) {
  const double read = value_of(rows, "get/floor", 8, "us"), cas = value_of(rows, "cas/floor", 8, "us");
  const double pf = value_of(rows, "hash-find/onesided/phasal", 1, "us"), ia = value_of(rows, "hash-insert/onesided/atomic", 1, "us");
  const double inv = value_of(rows, "hash-insert/invoked/atomic", batch, "ops_per_s"), wr = value_of(rows, "call-write", 8, "ops_per_s");
  const double au = value_of(rows, "auto/mixed", 1, "ops_per_s");
  double best = 0;
  for (const Row& r : rows)
    if (r.variant.rfind("best/mixed/", 0) == 0) best = r.value;
  std::printf("\ntargets (same run):\n");
  std::printf("  phasal find / fabric READ      %6.2f (<= 1.2)\n", pf / read);
  std::printf("  atomic insert / fabric CAS     %6.2f (<= 3.5)\n", ia / cas);
  std::printf("  batched invoked insert / write-mode calls %6.2f (>= 0.5; %.1f M inserts/s)\n", inv / wr, inv / 1e6);
  std::printf("  auto / best fixed (mixed)      %6.2f (>= 0.9)\n", au / best);
  std::printf("  model-picks-best               %6.2f (>= 0.9)\n", value_of(rows, "model-picks-best", 1, "fraction"));
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  const Args args = parse(argc, argv);
  if (rt.size() < 2) fail("bench_objects: run with at least 2 processes (loomrun -n 2)");
  const int iters = args.quick ? 500 : 2000;
  ContainerOptions co;
  co.iters = iters;
  if (args.quick) co.rounds = 1;
  Fig6Options fo;
  if (args.quick) fo.pushes = 150, fo.compute_us = {0, 2, 10, 20};
  std::vector<Row> rows;
  {
    objects::Context ctx(rt);
    if (args.scale()) {
      ScaleOptions so;
      if (args.quick) so.ops = 600, so.rounds = 1;
      scale_rows(ctx, so, rows);
    }
    if (args.want("floors")) floor_rows(ctx, iters * 5, rows);
    objects::Components components;
    if (!args.scale()) components = component_rows(ctx, iters, rows);
    if (args.want("contended")) contended_rows(ctx, components, iters, rows);
    if (args.want("containers")) container_rows(ctx, co, rows);
    if (args.want("mixed")) mixed_rows(ctx, co, rows);
    if (args.want("containers") && rt.rank() == 0) model_pick_row(rows);
    if (args.want("fig6")) fig6_rows(ctx, "invoked", true, fo, rows);
  }
  if (args.want("fig6")) {
    // The same with a progress thread: a helper polls every worker's calls.
    invoke::Config cfg = invoke::Config::from_env();
    cfg.helpers = 1;
    invoke::Invoker inv(rt, cfg);
    objects::Context ctx(rt, &inv);
    fig6_rows(ctx, "invoked-pt", false, fo, rows);
  }
  if (rt.rank() == 0) {
    if (!args.scale()) report_targets(rows, co.batch);
    std::printf("load average: %.2f\n", load_average());
    // Under an emulated wire every row crossed it (rank 0 against the others): each names it.
    const std::string w = wire_suffix(rt.size());
    for (Row& r : rows) r.variant += w;
    if (!args.csv.empty()) write_csv(args.csv, rows);
  }
  rt.barrier();
  return 0;
}
