// bench_objects' container rows: rank 0 operates on data owned by its calibration peer — rank 1,
// or the first rank across an emulated wire or a network: the rank the model's components are
// measured against — (a HashMap's keys whose part is the peer's, a Queue hosted there) while the
// others serve calls in the Context's barrier; the mixed workload runs on every process at once.
#include "bench/objects_containers.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <unordered_set>

#include "loom/objects/calibrate.hpp"
#include "loom/objects/projection.hpp"
#include "loom/objects/hash_map.hpp"
#include "loom/objects/queue.hpp"

namespace loom::bench {

using objects::Level;
using objects::Op;
using objects::Policy;

namespace {

std::string variant(Op op, Policy p, Level l) {
  return std::string(objects::name(op)) + "/" + std::string(objects::name(p)) + "/" + std::string(objects::name(l));
}

// Microseconds per call of f(i), i in [0, n): the median of five consecutive fifths, so that a
// moment the process lost its core moves no row.
template <typename F>
double us_each(size_t n, F&& f) {
  constexpr size_t kParts = 5;
  std::vector<double> t;
  for (size_t part = 0; part < kParts; ++part) {
    const size_t first = n * part / kParts, last = n * (part + 1) / kParts;
    if (first == last) continue;
    const auto t0 = clk::now();
    for (size_t i = first; i < last; ++i) f(i);
    t.push_back(seconds_since(t0) / static_cast<double>(last - first) * 1e6);
  }
  return median(t);
}

struct Cell {
  Op op;
  Policy p;
  Level l;
  size_t batch;
  double us;
  bool checksum = false;  // seed 001's checksum queue (fully atomic): its rows' level is "checksum"
};

std::string variant(const Cell& x) {
  return x.checksum ? std::string(objects::name(x.op)) + "/" + std::string(objects::name(x.p)) + "/checksum" : variant(x.op, x.p, x.l);
}

void add(std::vector<Row>& rows, const Cell& x, double model_us) {
  const std::string v = variant(x);
  rows.push_back({v, x.batch, "us", x.us, "us"});
  rows.push_back({v, x.batch, "ops_per_s", 1e6 / x.us, "ops/s"});
  rows.push_back({v, x.batch, "model_us", model_us, "us"});
}

// The rows are best cases, as the model's predictions are (no collision, no contention): a
// HashMap's keys start in buckets of their own (none is ever displaced, each lands in its first
// bucket), its timed inserts go to fresh buckets (last written by the owner when it made them;
// a line may hold a bucket written before), its finds to buckets this process wrote; a Queue's
// timed passes run on slots and counters this process touched just before. The mixed workload
// has collisions, contention and lines moving between processes.
void hash_cells(objects::Context& ctx, Policy p, int peer, const ContainerOptions& o, std::vector<Cell>& out) {
  const size_t n = static_cast<size_t>(o.iters);
  objects::HashMap<uint64_t, uint64_t> m(ctx, 16 * n * static_cast<size_t>(ctx.size()), p);
  // Keys whose part is the peer's, each starting in a bucket of its own, taken in turns: the two
  // timed insert rows' keys in the part's two halves (neither row inserts into lines the other
  // brought), the batched and warm-up keys anywhere.
  const size_t half = m.capacity() / static_cast<size_t>(ctx.size()) / 2;
  std::vector<uint64_t> a, b, batched, other;
  std::vector<uint64_t>* turn[] = {&a, &b, &batched, &other};
  std::unordered_set<size_t> starts;
  for (uint64_t k = 1, j = 0; j < 4 * n; ++k) {
    if (m.owner_of(k) != peer) continue;
    const size_t start = m.first_bucket_of(k);
    auto& to = *turn[j % 4];
    if ((&to == &a && start >= half) || (&to == &b && start < half) || !starts.insert(start).second) continue;
    to.push_back(k), ++j;
  }
  uint64_t sink = 0;
  if (ctx.rank() == 0) {
    // First uses left out (queue pairs, channels, return slots, this process's mappings of the
    // part's pages), through keys of their own: the timed keys' buckets stay fresh.
    for (uint64_t k : other) m.insert(k, k);
    for (uint64_t k : other) sink += m.find(k).value_or(0);
    out.push_back({Op::HashInsert, p, Level::Atomic, 1, us_each(n, [&](size_t i) { m.insert(a[i], a[i]); })});
    out.push_back({Op::HashInsert, p, Level::PhasalInsert, 1, us_each(n, [&](size_t i) { m.insert(b[i], b[i], Level::PhasalInsert); })});
  }
  ctx.barrier();
  if (ctx.rank() == 0) {
    out.push_back({Op::HashFind, p, Level::Atomic, 1, us_each(n, [&](size_t i) { sink += m.find(a[i]).value_or(0); })});
    out.push_back({Op::HashFind, p, Level::PhasalFind, 1, us_each(n, [&](size_t i) { sink += m.find(b[i], Level::PhasalFind).value_or(0); })});
    std::vector<std::pair<uint64_t, uint64_t>> items;
    for (uint64_t k : batched) items.emplace_back(k, k);
    const size_t nb = n / o.batch;
    out.push_back({Op::HashInsert, p, Level::Atomic, o.batch, us_each(nb, [&](size_t i) {
                     m.insert_many(std::span(items).subspan(i * o.batch, o.batch));
                   }) / static_cast<double>(o.batch)});
  }
  ctx.barrier();
  if (ctx.rank() == 0) {
    const size_t nb = n / o.batch;
    for (Level l : {Level::Atomic, Level::PhasalFind})
      out.push_back({Op::HashFind, p, l, o.batch, us_each(nb, [&](size_t i) {
                       for (auto& v : m.find_many(std::span<const uint64_t>(batched).subspan(i * o.batch, o.batch), l)) sink += v.value_or(0);
                     }) / static_cast<double>(o.batch)});
  }
  if (sink == 42) std::printf(" ");
}

void queue_cells(objects::Context& ctx, Policy p, int peer, const ContainerOptions& o, std::vector<Cell>& out) {
  const size_t n = static_cast<size_t>(o.iters);
  objects::Queue<uint64_t> q(ctx, peer, n, p);
  uint64_t sink = 0;
  auto phase = [&](auto&& f) {
    if (ctx.rank() == 0) f();
    ctx.barrier();
  };
  phase([&] {  // a pass over every slot first: first uses and other processes' cache lines left out
    for (size_t i = 0; i < n; ++i) q.try_push(i);
    for (size_t i = 0; i < n; ++i) sink += q.try_pop().value_or(0);
  });
  phase([&] { out.push_back({Op::QueuePush, p, Level::Atomic, 1, us_each(n, [&](size_t i) { q.try_push(i); })}); });
  phase([&] { out.push_back({Op::QueuePop, p, Level::Atomic, 1, us_each(n, [&](size_t) { sink += q.try_pop().value_or(0); })}); });
  phase([&] { out.push_back({Op::QueuePush, p, Level::PhasalPush, 1, us_each(n, [&](size_t i) { q.try_push(i, Level::PhasalPush); })}); });
  phase([&] { out.push_back({Op::QueuePop, p, Level::PhasalPop, 1, us_each(n, [&](size_t) { sink += q.try_pop(Level::PhasalPop).value_or(0); })}); });
  std::vector<uint64_t> vals(o.batch, 7);
  const size_t nb = n / o.batch;
  for (Level push : {Level::Atomic, Level::PhasalPush}) {
    const Level pop = push == Level::Atomic ? Level::Atomic : Level::PhasalPop;
    phase([&] { out.push_back({Op::QueuePush, p, push, o.batch, us_each(nb, [&](size_t) { q.push_many(vals, push); }) / static_cast<double>(o.batch)}); });
    phase([&] {
      out.push_back({Op::QueuePop, p, pop, o.batch, us_each(nb, [&](size_t) { sink += q.pop_many(o.batch, pop).size(); }) / static_cast<double>(o.batch)});
    });
  }
  if (sink == 42) std::printf(" ");
}

// Seed 001's other two queue designs: the checksum queue at the peer (fully atomic, its value and
// checksum in one WRITE), and the local level — a queue hosted by rank 0, used by rank 0 alone.
void queue_design_cells(objects::Context& ctx, Policy p, int peer, const ContainerOptions& o, std::vector<Cell>& out) {
  const size_t n = static_cast<size_t>(o.iters);
  uint64_t sink = 0;
  auto timed = [&](objects::Queue<uint64_t>& q, Level l, bool checksum) {
    if (ctx.rank() == 0) {
      for (size_t i = 0; i < n; ++i) q.try_push(i, l);  // first uses left out, as above
      for (size_t i = 0; i < n; ++i) sink += q.try_pop(l).value_or(0);
      out.push_back({Op::QueuePush, p, l, 1, us_each(n, [&](size_t i) { q.try_push(i, l); }), checksum});
      out.push_back({Op::QueuePop, p, l, 1, us_each(n, [&](size_t) { sink += q.try_pop(l).value_or(0); }), checksum});
    }
    ctx.barrier();
  };
  if (p != Policy::Cached) {
    objects::Queue<uint64_t> q(ctx, peer, n, objects::QueueLayout::Checksum, p);
    timed(q, Level::Atomic, true);
    objects::Queue<uint64_t> mine(ctx, 0, n, p);
    timed(mine, Level::Local, false);
  }
  if (sink == 42) std::printf(" ");
}

// A row's model: the components against the peer; a Cached hash row's, mixed by where its words
// are (a key's control word is in any process's block, as its hash falls). A Cached queue's
// counters share one block, at one manager: its rows are priced at the peer.
double model_of(const Cell& x, const objects::Components& peer, const objects::Components& self, const objects::JobLayout& layout) {
  const bool hashed = x.op == Op::HashInsert || x.op == Op::HashFind;
  if (x.checksum) return objects::predict_checksum(peer, x.op, x.p);
  if (x.p != Policy::Cached || !hashed) return objects::predict(peer, x.op, x.p, x.l, x.batch);
  const bool across = layout.scale.nodes > 1;
  const objects::Placements at{self, across ? self : peer, peer};
  return objects::predict_at(at, layout.scale, x.op, x.p, x.l, objects::Writers::One, x.batch);
}

}  // namespace

// Each policy's rows are compared with components measured just before them: this machine's
// speed drifts by 2x over seconds (a shared host), and a model is only as good as its inputs.
// The policies take turns over `rounds` rounds (each round in another order); a row is the
// median of its rounds, its model the median of theirs.
void container_rows(objects::Context& ctx, const ContainerOptions& o, std::vector<Row>& rows) {
  struct Rounds {
    Cell first;
    std::vector<double> us, model;
  };
  std::vector<Rounds> rounds;  // in the first round's order
  std::vector<objects::Components> calibrations;
  const size_t np = std::size(objects::kFixedPolicies);
  const int peer = objects::calibration_peer(ctx);  // the rows' data and the components' peer are one rank
  // A Cached map's words are not at the keys' owner: its region's blocks have every process as
  // manager in turn, so of rank 0's operations a share is on its own process and node. Its rows'
  // model mixes them as the node sweep does (objects/projection.hpp; a process on rank 0's node
  // priced as rank 0 itself), with rank 0 the one writer.
  const objects::JobLayout layout = objects::job_layout(ctx);
  const objects::Components self = objects::measure_components(ctx, o.iters, 0);
  for (int r = 0; r < o.rounds; ++r)
    for (size_t j = 0; j < np; ++j) {
      const Policy p = objects::kFixedPolicies[(j + static_cast<size_t>(r)) % np];
      const objects::Components c = objects::measure_components(ctx, o.iters, peer);
      calibrations.push_back(c);
      std::vector<Cell> mine;
      hash_cells(ctx, p, peer, o, mine);
      queue_cells(ctx, p, peer, o, mine);
      queue_design_cells(ctx, p, peer, o, mine);
      for (const Cell& x : mine) {
        auto same = [&](const Rounds& k) { return variant(k.first) == variant(x) && k.first.batch == x.batch; };
        auto it = std::find_if(rounds.begin(), rounds.end(), same);
        if (it == rounds.end()) it = rounds.insert(rounds.end(), Rounds{x, {}, {}});
        it->us.push_back(x.us);
        it->model.push_back(model_of(x, c, self, layout));
      }
    }
  if (ctx.rank() != 0) return;
  // The floor of any model here: the same components measured again a moment later.
  auto spread = [&](double objects::Components::*f) {
    double lo = calibrations.front().*f, hi = lo;
    for (const auto& c : calibrations) lo = std::min(lo, c.*f), hi = std::max(hi, c.*f);
    return std::pair{lo, hi};
  };
  const auto [miss_lo, miss_hi] = spread(&objects::Components::miss);
  const auto [rpc_lo, rpc_hi] = spread(&objects::Components::rpc);
  std::printf("\ncomponents over the policies' %zu calibrations: miss %.3f-%.3f us, rpc %.3f-%.3f us\n", calibrations.size(), miss_lo, miss_hi,
              rpc_lo, rpc_hi);
  std::printf("\ncontainers, rank 0 -> data at rank %d: us per operation, median of %d rounds (model: from components measured just before each policy's rows)\n",
              peer, o.rounds);
  std::printf("%-34s %6s %10s %10s %7s\n", "variant", "batch", "measured", "model", "ratio");
  for (auto& k : rounds) {
    Cell x = k.first;
    x.us = median(k.us);
    const double model = median(k.model);
    add(rows, x, model);
    std::printf("%-34s %6zu %10.3f %10.3f %7.2f\n", variant(x).c_str(), x.batch, x.us, model, x.us / model);
  }
}

// 90% finds, 10% inserts (replacing) of keys spread over every part, on every process at once.
// The machine's speed drifts over seconds, so the policies take turns in rounds (each round in
// another order) and each rate is the median over rounds.
void mixed_rows(objects::Context& ctx, const ContainerOptions& o, std::vector<Row>& rows) {
  const size_t keys = 4096, rounds = 7, ops = static_cast<size_t>(o.iters) * 40;  // per process and round
  const Policy policies[] = {Policy::OneSided, Policy::OwnerInvoked, Policy::Cached, Policy::Auto};
  std::vector<std::unique_ptr<objects::HashMap<uint64_t, uint64_t>>> maps;
  for (Policy p : policies) {
    maps.push_back(std::make_unique<objects::HashMap<uint64_t, uint64_t>>(ctx, 4 * keys, p, objects::Workload{0.9, Level::Atomic}));
    for (uint64_t k = static_cast<uint64_t>(ctx.rank()); k < keys; k += static_cast<uint64_t>(ctx.size())) maps.back()->insert(k, k);
  }
  ctx.barrier();
  std::map<Policy, std::vector<double>> rates;
  std::mt19937_64 rng(static_cast<uint64_t>(ctx.rank()) * 7919 + 1);
  uint64_t sink = 0;
  for (size_t r = 0; r < rounds; ++r)
    for (size_t j = 0; j < std::size(policies); ++j) {
      const size_t k = (j + r) % std::size(policies);
      auto& m = *maps[k];
      const auto t0 = clk::now();
      for (size_t i = 0; i < ops; ++i) {
        const uint64_t key = rng() % keys;
        if (rng() % 10 == 0) m.insert(key, i);
        else sink += m.find(key).value_or(0);
      }
      ctx.barrier();
      rates[policies[k]].push_back(static_cast<double>(ops) * ctx.size() / seconds_since(t0));
    }
  if (sink == 42) std::printf(" ");
  const uint64_t switches = maps.back()->chooser() != nullptr ? maps.back()->chooser()->switches() : 0;
  maps.clear();
  if (ctx.rank() != 0) return;
  std::map<Policy, double> rate;
  for (auto& [p, v] : rates) rate[p] = median(v);
  Policy best = Policy::OneSided;
  for (Policy p : objects::kFixedPolicies)
    if (rate[p] > rate[best]) best = p;
  std::printf("\nmixed workload (90%% find, 10%% insert, fully atomic, every process; median of %zu rounds): operations/s\n", rounds);
  for (Policy p : policies) {
    if (p != Policy::Auto) rows.push_back({"mixed/" + std::string(objects::name(p)), 1, "ops_per_s", rate[p], "ops/s"});
    std::printf("%-22s %12.0f   rounds (M/s):", ("mixed/" + std::string(objects::name(p))).c_str(), rate[p]);
    for (double x : rates[p]) std::printf(" %.2f", x / 1e6);
    std::printf("\n");
  }
  rows.push_back({"best/mixed/" + std::string(objects::name(best)), 1, "ops_per_s", rate[best], "ops/s"});
  rows.push_back({"auto/mixed", 1, "ops_per_s", rate[Policy::Auto], "ops/s"});
  std::printf("%-22s %12.0f  (%.2fx the best fixed policy, %s; Auto's switches: %llu)\n", "auto/mixed", rate[Policy::Auto],
              rate[Policy::Auto] / rate[best], std::string(objects::name(best)).c_str(),
              static_cast<unsigned long long>(switches));
}

void model_pick_row(std::vector<Row>& rows) {
  std::map<std::string, double> us, model;
  for (const Row& r : rows)
    if (r.size == 1 && r.metric == "us") us[r.variant] = r.value;
    else if (r.size == 1 && r.metric == "model_us") model[r.variant] = r.value;
  int cells = 0, good = 0;
  for (Op op : objects::kOps)
    for (Level l : {Level::Atomic, Level::PhasalWrite}) {
      double best = 1e300;
      for (Policy p : objects::kFixedPolicies) best = std::min(best, us[variant(op, p, l)]);
      Policy pick = objects::kFixedPolicies[0];  // the lowest model_us of the rows
      for (Policy p : objects::kFixedPolicies)
        if (model[variant(op, p, l)] < model[variant(op, pick, l)]) pick = p;
      ++cells;
      if (us[variant(op, pick, l)] <= 1.1 * best) ++good;
      const std::string cell = "model-pick/" + std::string(objects::name(op)) + "/" + std::string(objects::name(l));
      rows.push_back({cell, 1, "pick_over_best", us[variant(op, pick, l)] / best, "x"});
      rows.push_back({cell + "/" + std::string(objects::name(pick)), 1, "picked", 1, ""});
      std::printf("%-24s model picks %-9s measured best %.3f us, the pick %.3f us\n", (std::string(objects::name(op)) + "/" + std::string(objects::name(l))).c_str(),
                  std::string(objects::name(pick)).c_str(), best, us[variant(op, pick, l)]);
    }
  rows.push_back({"model-picks-best", 1, "fraction", static_cast<double>(good) / cells, ""});
  std::printf("model-picks-best: %d of %d cells\n", good, cells);
}

}  // namespace loom::bench
