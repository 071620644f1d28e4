// bench_mcts: MCTS for Hex under the tree policies (issue 19; docs/mcts.md).
//   loomrun -n P bench/bench_mcts [--quick] [--csv FILE] [--board N] [--K K] [--policy P,...] [--owner O,...]
//                                 [--threads T] [--seconds S] [--match] [--model] [--model-from CSV]
//                                 [search flags]
// Throughput from the empty board and from 10 fixed mid-game positions, each search `--seconds`
// long. Under loomrun -n P the run first measures local-np1-t1 and local-np1-t2 on rank 0 alone
// while the other processes sleep, then each policy on every process: every ratio is taken in
// one run; owner-invoked runs under each --owner protocol (default both; variant
// `owner-invoked-random-*` for random-at-expansion) and each --aggregation (default trad; `-ovfl`
// after the name for ovfl: seed 000's Figure 3 study). Rows (variant `<policy>-np<P>-t<T>`, size N): rollouts_per_s (empty board),
// rollouts_per_s_mid, rollouts_per_s_all (every position), playouts_per_s, rollouts_per_cpu_s, speedup (rollouts_per_s over
// local-np1-t1's), and per rollout remote_calls, messages, bytes, misses, invalidations,
// vl_collisions, depth, edges_read, edges_summed, bytes_fetched, released_blocks, creations, deferred, kept_calls (ovfl: calls kept while a ring was full), worker_us,
// and over the searches pairs_called ((worker, destination) pairs, summed over searches) and
// pairs_kept_over_4k (the fraction of them whose kept calls once exceeded 4 KiB) (the workers' CPU time); load_avg beside each. --match
// plays each policy against local-1t (bench/mcts_match.cpp), --match-owners owner-invoked's two
// owner protocols against each other at equal time; --model adds the tree policies' cost
// model beside each row and its projection (bench/mcts_model.cpp), --model-from CSV the same with
// the policies' fitted costs (extra_us) taken from another run's CSV (the smallest scale of a sweep).
// The search flags' --playout bridge and --rave K (a stronger engine than the plain one, for
// every policy and the local baselines alike) add `-bridge` and `-rave<K>` to every variant,
// before any `@condition`.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <utility>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/mcts_match.hpp"
#include "bench/mcts_model.hpp"
#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/options.hpp"
#include "loom/mcts_shared_tree/policies.hpp"

using namespace loom;
using namespace loom::bench;
using mcts::Hex;

namespace {

struct Args {
  bool quick = false, match = false, model = false;
  bool match_owners = false;  // --match-owners: owner-invoked's two owner protocols against each other
  std::string model_from;
  std::string csv;
  std::vector<mcts::TreePolicy> policies{mcts::TreePolicy::OwnerInvoked, mcts::TreePolicy::CachedShared, mcts::TreePolicy::Root};
  // owner-invoked runs under each (rows `owner-invoked-*` and `owner-invoked-random-*`)
  std::vector<mcts::OwnerProtocol> owners{mcts::OwnerProtocol::PathHash, mcts::OwnerProtocol::RandomAtExpansion};
  // and under each aggregation (rows `-ovfl` for ovfl)
  std::vector<mcts::Aggregation> aggregations{mcts::Aggregation::Trad};
  mcts::SearchFlags flags;
  bool seconds_given = false;
  bool reference = false;  // --match-reference: local-1t at twice the budget against itself
  MatchOptions match_options;
};

Args parse(int argc, char** argv) {
  Args a;
  a.flags.budget = mcts::Budget{0, 1.0};
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--policy" && i + 1 < argc) {  // a list here
      a.policies.clear();
      std::stringstream ss(argv[++i]);
      for (std::string p; std::getline(ss, p, ',');)
        if (p != "none") a.policies.push_back(mcts::parse_tree_policy(p));  // `local` only plays a --match (its rows come first anyway)
    } else if (s == "--owner" && i + 1 < argc) {  // a list here too
      a.owners.clear();
      std::stringstream ss(argv[++i]);
      for (std::string o; std::getline(ss, o, ',');) a.owners.push_back(mcts::parse_owner_protocol(o));
    } else if (s == "--aggregation" && i + 1 < argc) {  // and this
      a.aggregations.clear();
      std::stringstream ss(argv[++i]);
      for (std::string o; std::getline(ss, o, ',');) a.aggregations.push_back(mcts::parse_aggregation(o));
    } else if (s == "--seconds" && i + 1 < argc) {
      mcts::take_search_flag(argc, argv, i, a.flags);
      a.seconds_given = true;
    } else if (mcts::take_search_flag(argc, argv, i, a.flags)) {
      continue;
    } else if (s == "--quick") {
      a.quick = true;
    } else if (s == "--match-owners") {
      a.match_owners = true;
    } else if (s == "--match") {
      a.match = true;
    } else if (s == "--model") {
      a.model = true;
    } else if (s == "--model-from" && i + 1 < argc) {
      a.model = true;
      a.model_from = argv[++i];
    } else if (s == "--match-reference") {
      a.match = a.reference = true;
    } else if (a.match_options.take_flag(argc, argv, i)) {
      continue;
    } else if (s == "--threads" && i + 1 < argc) {
      setenv("LOOM_THREADS", argv[++i], 1);  // read by the Runtime
    } else if (s == "--csv" && i + 1 < argc) {
      a.csv = argv[++i];
    } else {
      fail("bench_mcts: unknown argument ", s, " (--quick, --csv FILE, --policy P[,P], --owner O[,O], --aggregation A[,A], --threads T, --seconds S, --match, --match-owners, --match-reference, --model, --model-from CSV,\n", MatchOptions::kUsage, ",\n",
           mcts::search_flags_usage(), ")");
    }
  }
  if (a.flags.budget.seconds <= 0) fail("bench_mcts: throughput is measured with --seconds, not --rollouts");
  if (!a.model_from.empty() && !std::ifstream(a.model_from)) fail("bench_mcts: --model-from ", a.model_from, ": cannot read it");
  if (a.quick && !a.seconds_given) a.flags.budget.seconds = 0.25;
  if (a.quick) a.match_options.quick();
  a.match_options.playout = a.flags.playout;
  return a;
}

// Ten positions from the middle of a game: a third of the board filled by a fixed random game,
// nobody connected yet and no win in one move (the same positions in every run).
std::vector<Hex::State> mid_game_positions(const Hex& g, int count) {
  std::vector<Hex::State> out;
  mcts::Rng rng(20261125);
  while (static_cast<int>(out.size()) < count) {
    Hex::State s = g.initial();
    Hex::Move legal[Hex::kMaxN * Hex::kMaxN];
    for (int k = 0; k < g.max_moves() / 3; ++k) {
      const int n = g.legal_moves(s, legal);
      g.play(s, legal[rng.below(static_cast<uint32_t>(n))]);
    }
    if (g.winner(s) < 0 && mcts::winning_move(g, s) < 0) out.push_back(s);
  }
  return out;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Measured {
  double empty_rate = 0, mid_rate = 0, playouts = 0, rollouts = 0, seconds = 0, cpu = 0;
  mcts::RolloutCounters c;
};

// One search per position: the empty board, then the mid-game ones, after one search of the
// empty board that is not counted (the first search of a search object pays for its memory's
// first touch and has no rate yet to size its sharing intervals by: at 20 ms a search, a
// tenth to a quarter of its rollouts). Every process that takes part calls it; CPU time is
// summed over them.
Measured measure(mcts::Search<Hex>& s, const Hex& g, const std::vector<Hex::State>& mid, mcts::Budget b, Runtime& rt, bool alone) {
  Measured m;
  s.run(g.initial(), b);
  const double cpu0 = cpu_seconds();
  auto one = [&](const Hex::State& p) {
    const mcts::SearchResult r = s.run(p, b);
    m.c.add(r.counters);
    m.rollouts += static_cast<double>(r.counters.rollouts), m.seconds += r.seconds;
    m.playouts += static_cast<double>(r.counters.playouts);
    return static_cast<double>(r.counters.rollouts) / r.seconds;
  };
  m.empty_rate = one(g.initial());
  double mid_rollouts = 0, mid_seconds = 0;
  for (const Hex::State& p : mid) {
    const double r0 = m.rollouts, s0 = m.seconds;
    one(p);
    mid_rollouts += m.rollouts - r0, mid_seconds += m.seconds - s0;
  }
  m.mid_rate = mid_rollouts / mid_seconds;
  m.cpu = cpu_seconds() - cpu0;
  if (!alone) {
    double total = 0;
    for (double c : rt.bootstrap().allgather_value(m.cpu)) total += c;
    m.cpu = total;
  }
  return m;
}

void add_rows(const std::string& variant, size_t n, const Measured& m, double baseline, std::vector<Row>& rows) {
  const double per = std::max(1.0, m.rollouts);
  const mcts::RolloutCounters& c = m.c;
  rows.push_back({variant, n, "rollouts_per_s", m.empty_rate, "1/s"});
  rows.push_back({variant, n, "rollouts_per_s_mid", m.mid_rate, "1/s"});
  rows.push_back({variant, n, "rollouts_per_s_all", m.rollouts / m.seconds, "1/s"});
  rows.push_back({variant, n, "playouts_per_s", m.playouts / m.seconds, "1/s"});
  rows.push_back({variant, n, "rollouts_per_cpu_s", m.rollouts / m.cpu, "1/s"});
  rows.push_back({variant, n, "speedup", baseline > 0 ? m.empty_rate / baseline : 1.0, "x"});
  rows.push_back({variant, n, "speedup_mid", 0, "x"});  // filled by the caller
  rows.push_back({variant, n, "remote_calls", static_cast<double>(c.remote_calls) / per, "per rollout"});
  rows.push_back({variant, n, "messages", static_cast<double>(c.messages) / per, "per rollout"});
  rows.push_back({variant, n, "bytes", static_cast<double>(c.bytes) / per, "per rollout"});
  rows.push_back({variant, n, "misses", static_cast<double>(c.misses) / per, "per rollout"});
  rows.push_back({variant, n, "invalidations", static_cast<double>(c.invalidations) / per, "per rollout"});
  rows.push_back({variant, n, "vl_collisions", static_cast<double>(c.vl_collisions) / per, "per rollout"});
  rows.push_back({variant, n, "depth", static_cast<double>(c.depth_sum) / per, "edges"});
  rows.push_back({variant, n, "edges_read", static_cast<double>(c.edges_read) / per, "per rollout"});
  rows.push_back({variant, n, "bytes_fetched", static_cast<double>(c.bytes_fetched) / per, "per rollout"});
  rows.push_back({variant, n, "released_blocks", static_cast<double>(c.released_blocks) / per, "per rollout"});
  rows.push_back({variant, n, "edges_summed", static_cast<double>(c.edges_summed) / per, "per rollout"});
  rows.push_back({variant, n, "creations", static_cast<double>(c.creations) / per, "per rollout"});
  rows.push_back({variant, n, "deferred", static_cast<double>(c.deferred) / per, "per rollout"});
  rows.push_back({variant, n, "kept_calls", static_cast<double>(c.kept_calls) / per, "per rollout"});
  rows.push_back({variant, n, "pairs_called", static_cast<double>(c.pairs_called), "pairs"});
  rows.push_back({variant, n, "pairs_kept_over_4k", c.pairs_called ? static_cast<double>(c.pairs_kept_over_4k) / static_cast<double>(c.pairs_called) : 0, "fraction"});
  rows.push_back({variant, n, "worker_us", static_cast<double>(c.worker_cpu_ns) / 1e3 / per, "us"});
  rows.push_back({variant, n, "load_avg", load_average(), ""});
}

void print_table(const std::vector<Row>& rows, const std::vector<std::string>& variants) {
  std::printf("\n%-26s %12s %12s %8s %8s %8s %8s %8s %8s %8s %6s\n", "variant", "rollouts/s", "mid", "x local", "x mid", "calls/r", "msgs/r",
              "misses/r", "vl/r", "depth", "load");
  for (const std::string& v : variants)
    std::printf("%-26s %12.0f %12.0f %8.2f %8.2f %8.2f %8.2f %8.3f %8.3f %8.2f %6.2f\n", v.c_str(), value_of(rows, v, "rollouts_per_s"),
                value_of(rows, v, "rollouts_per_s_mid"), value_of(rows, v, "speedup"), value_of(rows, v, "speedup_mid"),
                value_of(rows, v, "remote_calls"), value_of(rows, v, "messages"), value_of(rows, v, "misses"), value_of(rows, v, "vl_collisions"),
                value_of(rows, v, "depth"), value_of(rows, v, "load_avg"));
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_arguments([&] { return parse(argc, argv); });
  Runtime rt(argc, argv);
  const int np = rt.size(), threads = rt.threads_per_process();
  const Hex g(a.flags.board, a.flags.playout);
  const std::vector<Hex::State> mid = mid_game_positions(g, a.quick ? 3 : 10);
  const size_t n = static_cast<size_t>(a.flags.board);
  std::vector<Row> rows;
  std::vector<std::string> variants;
  // The baselines: rank 0 alone, the others asleep in the bootstrap's barrier.
  for (int t : {1, 2}) {
    const std::string v = "local-np1-t" + std::to_string(t);
    if (rt.rank() == 0) {
      mcts::SearchConfig cfg = a.flags.search;
      cfg.threads = t;
      mcts::LocalSearch<Hex> s(g, cfg);
      add_rows(v, n, measure(s, g, mid, a.flags.budget, rt, true), value_of(rows, "local-np1-t1", "rollouts_per_s"), rows);
    }
    variants.push_back(v);
    rt.bootstrap().barrier();
  }
  if (a.reference) {
    if (rt.rank() == 0) reference_rows(a.match_options, a.flags.search, rows);
    rt.bootstrap().barrier();
  }
  {
    objects::Context ctx(rt);
    ModelInputs model;
    if (a.model) model = measure_model_inputs(ctx, a.flags.search.region_block);
    for (mcts::TreePolicy p : a.policies) {
      if (p == mcts::TreePolicy::Local) {
        if (np != 1) fail("bench_mcts: --policy local is one process's tree (loomrun -n 1, --threads T)");
        if (a.match) match_rows(rt, ctx, p, a.flags.search, a.match_options, rows);
        continue;
      }
      const bool invoked = p == mcts::TreePolicy::OwnerInvoked;
      const std::vector<mcts::OwnerProtocol> owners = invoked ? a.owners : std::vector{a.flags.search.owner};
      const std::vector<mcts::Aggregation> aggregations = invoked ? a.aggregations : std::vector{a.flags.search.aggregation};
      std::vector<std::pair<mcts::OwnerProtocol, mcts::Aggregation>> configs;
      for (mcts::OwnerProtocol o : owners)
        for (mcts::Aggregation ag : aggregations) configs.emplace_back(o, ag);
      for (auto [o, ag] : configs) {
        mcts::SearchConfig cfg = a.flags.search;
        cfg.threads = threads, cfg.owner = o, cfg.aggregation = ag;
        auto s = mcts::make_search(p, g, cfg, &ctx, &rt);
        const Measured m = measure(*s, g, mid, a.flags.budget, rt, false);
        const std::string v = mcts::variant_name(p, cfg) + "-np" + std::to_string(np) + "-t" + std::to_string(threads);
        if (rt.rank() == 0) add_rows(v, n, m, value_of(rows, "local-np1-t1", "rollouts_per_s"), rows);
        variants.push_back(v);
        if (a.match) match_rows(rt, ctx, p, cfg, a.match_options, rows);
      }
    }
    if (a.match_owners) owners_match_rows(rt, ctx, a.flags.search, a.match_options, rows);
    if (a.model && rt.rank() == 0) model_rows(model, ModelOptions{a.policies, np, threads, a.flags.search.in_flight, n, a.model_from}, rows);
  }
  if (rt.rank() == 0) {
    const double mid1 = value_of(rows, "local-np1-t1", "rollouts_per_s_mid");
    for (Row& r : rows)
      if (r.metric == "speedup_mid") r.value = mid1 > 0 ? value_of(rows, r.variant, "rollouts_per_s_mid") / mid1 : 0;
    // Under an emulated wire, the rows of the distributed trees name it; one process's tree
    // (local-np1-*) crosses no wire and keeps its name.
    // Rows of a stronger engine than the plain one (--playout, --rave) name it.
    std::string engine;
    if (a.flags.playout != mcts::HexPlayout::Uniform) engine += "-" + std::string(mcts::name(a.flags.playout));
    if (a.flags.search.rave != 0) engine += "-rave" + std::to_string(a.flags.search.rave);
    if (!engine.empty()) {
      for (Row& r : rows) r.variant = r.variant.substr(0, r.variant.find('@')) + engine + (r.variant.find('@') == std::string::npos ? "" : r.variant.substr(r.variant.find('@')));
      for (std::string& v : variants) v += engine;
    }
    if (const std::string w = wire_suffix(np); !w.empty()) {
      for (Row& r : rows)
        if (r.variant.rfind("local-np1", 0) != 0) r.variant += w;
      for (std::string& v : variants)
        if (v.rfind("local-np1", 0) != 0) v += w;
    }
    std::printf("MCTS for Hex %dx%d, K=%u, %.2f s per search, %d processes x %d threads\n", a.flags.board, a.flags.board, a.flags.search.playouts,
                a.flags.budget.seconds, np, threads);
    print_table(rows, variants);
    print_match_table(rows);
    std::printf("load average: %.2f\n", load_average());
    if (!a.csv.empty()) write_csv(a.csv, rows);
  }
  rt.barrier();
  return 0;
}
