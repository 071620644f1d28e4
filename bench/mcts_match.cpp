#include "bench/mcts_match.hpp"

#include <cmath>
#include <cstdio>
#include <memory>

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/policies.hpp"

namespace loom::bench {

using mcts::Hex;

MatchOptions MatchOptions::defaults(bool quick, int games) {
  MatchOptions o;
  if (quick) o.openings = 4;
  if (games > 0) o.openings = std::min(games, o.board * o.board);
  return o;
}

std::pair<double, double> wilson(double wins, double n) {
  if (n <= 0) return {0, 1};
  const double z = 1.96, p = wins / n, z2n = z * z / n;
  const double centre = (p + z2n / 2) / (1 + z2n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n);
  return {centre - half, centre + half};
}

namespace {

// One game from Black's stone at `opening`: the policy plays `colour`, local-1t the other.
// Returns 1 if the policy won.
int play_game(Runtime& rt, const Hex& g, mcts::Search<Hex>& policy, mcts::Search<Hex>* local, int opening, int colour, mcts::Budget b) {
  Hex::State s = g.initial();
  g.play(s, static_cast<Hex::Move>(opening));
  while (g.winner(s) < 0) {
    int best = -1;
    if (g.to_move(s) == colour) best = policy.run(s, b).best;
    else if (rt.rank() == 0) best = local->run(s, b).best;  // the others wait in the allgather
    best = rt.bootstrap().allgather_value(best)[0];
    if (best < 0) fail("bench_mcts --match: no move found");
    g.play(s, static_cast<Hex::Move>(best));
  }
  return g.winner(s) == colour ? 1 : 0;
}

}  // namespace

void match_rows(Runtime& rt, objects::Context& ctx, mcts::TreePolicy p, mcts::SearchConfig cfg, const MatchOptions& o, std::vector<Row>& rows) {
  const Hex g(o.board);
  const std::string v = std::string(mcts::name(p)) + "-np" + std::to_string(rt.size()) + "-t" + std::to_string(rt.threads_per_process());
  cfg.threads = rt.threads_per_process();
  mcts::SearchConfig one = cfg;
  one.threads = 1;
  one.seed = cfg.seed + 7777;
  const std::pair<const char*, mcts::Budget> conditions[] = {{"@equal-rollouts", mcts::Budget{o.rollouts, 0}}, {"@equal-time", mcts::Budget{0, o.seconds}}};
  for (const auto& [suffix, budget] : conditions) {
    auto policy = mcts::make_search(p, g, cfg, &ctx, &rt);
    std::unique_ptr<mcts::Search<Hex>> local;
    if (rt.rank() == 0) local = std::make_unique<mcts::LocalSearch<Hex>>(g, one);
    double wins = 0, games = 0;
    for (int cell = 0; cell < o.openings; ++cell)
      for (int colour : {0, 1}) wins += play_game(rt, g, *policy, local.get(), cell, colour, budget), ++games;
    if (rt.rank() != 0) continue;
    const auto [lo, hi] = wilson(wins, games);
    rows.push_back({v + suffix, static_cast<size_t>(o.board), "win_rate", wins / games, ""});
    rows.push_back({v + suffix, static_cast<size_t>(o.board), "wilson_lo", lo, ""});
    rows.push_back({v + suffix, static_cast<size_t>(o.board), "wilson_hi", hi, ""});
    rows.push_back({v + suffix, static_cast<size_t>(o.board), "games", games, ""});
    std::printf("%s%s: %.0f of %.0f games won against local-1t\n", v.c_str(), suffix, wins, games);
    std::fflush(stdout);
  }
}

void print_match_table(const std::vector<Row>& rows) {
  bool header = false;
  for (const Row& r : rows) {
    if (r.metric != "win_rate") continue;
    if (!header) std::printf("\n%-40s %8s %16s %6s\n", "match against local-1t", "win rate", "95% interval", "games"), header = true;
    double lo = 0, hi = 0, games = 0;
    for (const Row& q : rows)
      if (q.variant == r.variant) {
        if (q.metric == "wilson_lo") lo = q.value;
        if (q.metric == "wilson_hi") hi = q.value;
        if (q.metric == "games") games = q.value;
      }
    std::printf("%-40s %8.3f   [%.3f, %.3f] %6.0f\n", r.variant.c_str(), r.value, lo, hi, games);
  }
}

}  // namespace loom::bench
