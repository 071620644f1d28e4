// bench_objects: global pointers' component costs (seed 001 Table I's get, put, fetch-and-add,
// CAS, contended CAS) through an Endpoint, each beside the same fabric operation posted by hand
// on a lane of queue pairs with a registered buffer (the floor: what the Endpoint adds is the key
// lookup in its cache, the staging copy and its lock). Rank 0 measures against rank 1; for the
// contended CAS every process CASes one word at rank 0.
// Then the one-sided HashMap and Queue (docs/objects.md).
// Run: loomrun -n 2 bench_objects [--quick] [--csv FILE]. The owner-invoked and cached policies
// are not built yet; their rows will join these.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "coherence/lane.hpp"
#include "dsm/runtime/connect.hpp"
#include "objects/distributed_array.hpp"
#include "objects/endpoint.hpp"
#include "objects/hash_map.hpp"
#include "objects/queue.hpp"

using namespace loom;
using namespace loom::bench;

namespace {

struct Args {
  bool quick = false;
  std::string csv;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--csv" && i + 1 < argc) a.csv = argv[++i];
    else fail("bench_objects: unknown argument ", s, " (--quick, --csv FILE)");
  }
  return a;
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

// The one-sided HashMap, rank 0 alone operating on keys whose buckets are rank 1's: insert under Level::Atomic,
// find under Level::Atomic and Level::PhasalFind, each beside a READ of one bucket and a CAS.
void hash_rows(objects::Endpoint& ep, Runtime& rt, int iters, std::vector<Row>& rows) {
  const size_t cap = 1 << 16;
  objects::HashMap<uint64_t, uint64_t> m(ep, cap);
  // Keys whose home bucket is at rank 1 (the upper half of the buckets at np 2).
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; keys.size() < static_cast<size_t>(iters); ++k)
    if (std::hash<uint64_t>{}(k) % cap >= cap / static_cast<size_t>(rt.size()) &&
        std::hash<uint64_t>{}(k) % cap < 2 * cap / static_cast<size_t>(rt.size()))
      keys.push_back(k);
  rt.barrier();
  if (rt.rank() == 0) {
    auto t0 = clk::now();
    for (uint64_t k : keys) m.insert(k, k + 1);
    const double ins = seconds_since(t0) / static_cast<double>(keys.size()) * 1e6;
    uint64_t sink = 0;
    t0 = clk::now();
    for (uint64_t k : keys) sink += *m.find(k, objects::Level::Atomic);
    const double fa = seconds_since(t0) / static_cast<double>(keys.size()) * 1e6;
    t0 = clk::now();
    for (uint64_t k : keys) sink += *m.find(k, objects::Level::PhasalFind);
    const double fp = seconds_since(t0) / static_cast<double>(keys.size()) * 1e6;
    if (sink == 42) std::printf(" ");
    rows.push_back({"hash-insert/onesided/atomic", 1, "us", ins, "us"});
    rows.push_back({"hash-find/onesided/atomic", 1, "us", fa, "us"});
    rows.push_back({"hash-find/onesided/phasal", 1, "us", fp, "us"});
    std::printf("\nHashMap<uint64_t, uint64_t>, one-sided, rank 0 -> buckets at rank 1 (us per operation, no collisions to speak of)\n");
    std::printf("%-30s %9.3f\n%-30s %9.3f\n%-30s %9.3f\n", "hash-insert/onesided/atomic", ins, "hash-find/onesided/atomic", fa,
                "hash-find/onesided/phasal", fp);
  }
  rt.barrier();
}

// The one-sided Queue hosted at rank 1, rank 0 alone: pushes until full, then pops it empty.
void queue_rows(objects::Endpoint& ep, Runtime& rt, int iters, std::vector<Row>& rows) {
  objects::Queue<uint64_t> q(ep, 1, static_cast<size_t>(iters));
  if (rt.rank() == 0) {
    auto t0 = clk::now();
    for (int i = 0; i < iters; ++i)
      if (!q.try_push(static_cast<uint64_t>(i))) fail("bench_objects: queue full early");
    const double push = seconds_since(t0) / iters * 1e6;
    uint64_t sink = 0;
    t0 = clk::now();
    for (int i = 0; i < iters; ++i) sink += q.try_pop().value_or(0);
    const double pop = seconds_since(t0) / iters * 1e6;
    if (sink == 42) std::printf(" ");
    rows.push_back({"queue-push/onesided/atomic", 1, "us", push, "us"});
    rows.push_back({"queue-pop/onesided/atomic", 1, "us", pop, "us"});
    std::printf("\nQueue<uint64_t>, one-sided, rank 0 -> queue at rank 1 (us per operation, uncontended)\n");
    std::printf("%-30s %9.3f\n%-30s %9.3f\n", "queue-push/onesided/atomic", push, "queue-pop/onesided/atomic", pop);
  }
  rt.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  const Args args = parse(argc, argv);
  if (rt.size() < 2) fail("bench_objects: run with at least 2 processes (loomrun -n 2)");
  const int iters = args.quick ? 2000 : 20000;
  objects::Endpoint ep(rt);
  objects::DistributedArray<uint64_t> words(ep, 64 * static_cast<size_t>(rt.size()));
  for (auto& w : words.local()) w = 0;
  memory::RDMAMemory scratch = rt.allocator().allocate_chunk(1 << 21);
  Floor floor(rt, scratch);
  const objects::GlobalPtr<uint64_t> far = words.ptr(64);  // rank 1's first word
  const RemoteMemoryLocator reg = registration_at(rt, 1, far.address(), 8);
  rt.barrier();
  std::vector<Row> rows;
  auto row = [&](const std::string& name, double loom_us, double floor_us) {
    rows.push_back({name, 8, "us", loom_us, "us"});
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
  hash_rows(ep, rt, iters, rows);
  queue_rows(ep, rt, iters, rows);
  // Contended: every process CASes rank 0's word from the value it last saw.
  const objects::GlobalPtr<uint64_t> hot = words.ptr(0);
  uint64_t seen = 0;
  const double contended = us_per_op(iters / 4, [&](int) { seen = ep.compare_swap(hot, seen, seen + 1); });
  rt.barrier();
  if (rt.rank() == 0) {
    rows.push_back({"cas-contended", 8, "us", contended, "us"});
    std::printf("%-16s %9.3f %9s  (%d processes on one word)\n", "cas-contended", contended, "-", rt.size());
    std::printf("load average: %.2f\n", load_average());
    if (!args.csv.empty()) write_csv(args.csv, rows);
  }
  rt.barrier();
  floor.lane.wait();
  rt.barrier();
  rt.allocator().free_chunk(scratch);
  return 0;
}
