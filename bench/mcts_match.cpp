#include "bench/mcts_match.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/settings.hpp"

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/policies.hpp"

namespace loom::bench {

using mcts::Hex;

bool MatchOptions::take_flag(int argc, char** argv, int& i) {
  const std::string a = argv[i];
  if (a != "--games" && a != "--move-rollouts" && a != "--move-seconds" && a != "--match-rounds") return false;
  if (i + 1 >= argc) fail(a, " needs a value");
  const std::string v = argv[++i];
  if (a == "--move-seconds") {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x) || x < 1e-3 || x > 60) fail(a, "='", v, "' is not a number in 0.001..60");
    seconds = x;
    return true;
  }
  const int64_t x = settings::parse_int(v, a);
  if (a == "--games") {
    if (x < 1 || x > board * board) fail(a, "=", v, " is outside 1..", board * board, " (openings, each played twice)");
    openings = static_cast<int>(x);
  } else if (a == "--match-rounds") {
    if (x < 1 || x > 100) fail(a, "=", v, " is outside 1..100");
    rounds = static_cast<int>(x);
  } else {
    if (x < 1 || x > (int64_t{1} << 30)) fail(a, "=", v, " is outside 1..2^30");
    rollouts = static_cast<uint64_t>(x);
  }
  return true;
}

std::pair<double, double> wilson(double wins, double n) {
  if (n <= 0) return {0, 1};
  const double z = 1.96, p = wins / n, z2n = z * z / n;
  const double centre = (p + z2n / 2) / (1 + z2n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n);
  return {centre - half, centre + half};
}

namespace {

// The rollouts each side's searches ran (side 0: the one measured; 1: local-1t), and how many
// searches (moves found by a search).
struct Tally {
  double rollouts[2] = {0, 0}, searches[2] = {0, 0};
  void add(int side, const mcts::SearchResult& r) {
    if (r.counters.rollouts == 0) return;  // a winning move played without a search
    rollouts[side] += static_cast<double>(r.counters.rollouts), searches[side] += 1;
  }
  double per_search(int side) const { return searches[side] > 0 ? rollouts[side] / searches[side] : 0; }
};

// One game from Black's stone at `opening`: side 0 (the one measured) plays `colour`, side 1
// (local-1t) the other; move(side, state) is the move a side found. Returns 1 if side 0 won.
template <typename MoveOf>
int play_game(const Hex& g, int opening, int colour, MoveOf&& move) {
  Hex::State s = g.initial();
  g.play(s, static_cast<Hex::Move>(opening));
  while (g.winner(s) < 0) {
    const int best = move(g.to_move(s) == colour ? 0 : 1, s);
    if (best < 0) fail("bench_mcts --match: no move found");
    g.play(s, static_cast<Hex::Move>(best));
  }
  return g.winner(s) == colour ? 1 : 0;
}

// Every round of a match: side 0's wins of each round's `games` games.
struct Rounds {
  std::vector<double> wins;
  double games_per_round = 0;
  double total() const { return std::accumulate(wins.begin(), wins.end(), 0.0); }
};

// Plays o.rounds rounds of every opening with both colours; move(side, state) as in play_game.
template <typename MoveOf>
Rounds play_rounds(const Hex& g, const MatchOptions& o, MoveOf&& move) {
  Rounds r;
  r.games_per_round = 2.0 * o.openings;
  for (int round = 0; round < o.rounds; ++round) {
    double wins = 0;
    for (int cell = 0; cell < o.openings; ++cell)
      for (int colour : {0, 1}) wins += play_game(g, cell, colour, move);
    r.wins.push_back(wins);
  }
  return r;
}

void add_result(const std::string& variant, int board, const Rounds& r, const Tally& t, std::vector<Row>& rows, const char* opponent = "local-1t") {
  const double wins = r.total(), games = r.games_per_round * static_cast<double>(r.wins.size());
  const auto [lo, hi] = wilson(wins, games);
  const size_t n = static_cast<size_t>(board);
  for (double w : r.wins) rows.push_back({variant, n, "round_win_rate", w / r.games_per_round, ""});
  rows.push_back({variant, n, "win_rate", wins / games, ""});
  rows.push_back({variant, n, "wilson_lo", lo, ""});
  rows.push_back({variant, n, "wilson_hi", hi, ""});
  rows.push_back({variant, n, "games", games, ""});
  rows.push_back({variant, n, "rollouts_per_move", t.per_search(0), "rollouts"});
  rows.push_back({variant, n, "local_rollouts_per_move", t.per_search(1), "rollouts"});
  std::printf("%s: %.0f of %.0f games won against %s (rollouts per move %.0f against %.0f)", variant.c_str(), wins, games, opponent,
              t.per_search(0), t.per_search(1));
  if (r.wins.size() > 1) {
    std::printf("; by round:");
    for (double w : r.wins) std::printf(" %.3f", w / r.games_per_round);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

void reference_rows(const MatchOptions& o, mcts::SearchConfig cfg, std::vector<Row>& rows) {
  const Hex g(o.board, o.playout);
  cfg.threads = 1;
  mcts::SearchConfig other = cfg;
  other.seed = cfg.seed + 7777;
  const std::pair<const char*, mcts::Budget> conditions[] = {{"@double-rollouts", mcts::Budget{o.rollouts, 0}}, {"@double-time", mcts::Budget{0, o.seconds}}};
  for (const auto& [suffix, budget] : conditions) {
    mcts::LocalSearch<Hex> twice(g, cfg), once(g, other);
    const mcts::Budget doubled{budget.rollouts * 2, budget.seconds * 2};
    Tally t;
    auto move = [&](int side, const Hex::State& s) {
      const mcts::SearchResult r = side == 0 ? twice.run(s, doubled) : once.run(s, budget);
      t.add(side, r);
      return r.best;
    };
    const Rounds r = play_rounds(g, o, move);
    add_result(std::string("local-np1-t1") + suffix, o.board, r, t, rows);
  }
}

void match_rows(Runtime& rt, objects::Context& ctx, mcts::TreePolicy p, mcts::SearchConfig cfg, const MatchOptions& o, std::vector<Row>& rows) {
  const Hex g(o.board, o.playout);
  const std::string v = mcts::variant_name(p, cfg) + "-np" + std::to_string(rt.size()) + "-t" + std::to_string(rt.threads_per_process());
  cfg.threads = rt.threads_per_process();
  mcts::SearchConfig one = cfg;
  one.threads = 1;
  one.seed = cfg.seed + 7777;
  const std::pair<const char*, mcts::Budget> conditions[] = {{"@equal-rollouts", mcts::Budget{o.rollouts, 0}}, {"@equal-time", mcts::Budget{0, o.seconds}}};
  for (const auto& [suffix, budget] : conditions) {
    auto policy = mcts::make_search(p, g, cfg, &ctx, &rt);
    std::unique_ptr<mcts::Search<Hex>> local;
    if (rt.rank() == 0) local = std::make_unique<mcts::LocalSearch<Hex>>(g, one);
    Tally t;
    // Every process searches the policy's moves; rank 0 alone local-1t's (the others wait in
    // the allgather), and everyone plays rank 0's move.
    auto move = [&](int side, const Hex::State& s) {
      int best = -1;
      if (side == 0 || rt.rank() == 0) {
        const mcts::SearchResult r = side == 0 ? policy->run(s, budget) : local->run(s, budget);
        best = r.best, t.add(side, r);
      }
      return rt.bootstrap().allgather_value(best)[0];
    };
    const Rounds r = play_rounds(g, o, move);
    if (rt.rank() == 0) add_result(v + suffix, o.board, r, t, rows);
  }
}

void owners_match_rows(Runtime& rt, objects::Context& ctx, mcts::SearchConfig cfg, const MatchOptions& o, std::vector<Row>& rows) {
  const Hex g(o.board, o.playout);
  cfg.threads = rt.threads_per_process();
  mcts::SearchConfig random = cfg, hashed = cfg;
  random.owner = mcts::OwnerProtocol::RandomAtExpansion, hashed.owner = mcts::OwnerProtocol::PathHash;
  hashed.seed = cfg.seed + 7777;
  const std::string v = "owner-invoked-random-np" + std::to_string(rt.size()) + "-t" + std::to_string(cfg.threads) + "@vs-path-hash-equal-time";
  duel_rows(rt, ctx, Duelist{mcts::TreePolicy::OwnerInvoked, &g, random}, Duelist{mcts::TreePolicy::OwnerInvoked, &g, hashed}, o, v,
            "owner-invoked (path-hash)", rows);
}

void duel_rows(Runtime& rt, objects::Context& ctx, const Duelist& side0, const Duelist& side1, const MatchOptions& o, const std::string& variant,
               const char* opponent, std::vector<Row>& rows) {
  const Hex g(o.board);
  if (side0.game->size() != o.board || side1.game->size() != o.board) fail("bench_mcts: a duel's games are not Hex ", o.board, "x", o.board);
  auto search0 = mcts::make_search(side0.policy, *side0.game, side0.cfg, &ctx, &rt);
  auto search1 = mcts::make_search(side1.policy, *side1.game, side1.cfg, &ctx, &rt);
  const mcts::Budget budget{0, o.seconds};
  Tally t;
  // Both sides search on every process (collective searches); everyone plays rank 0's move.
  auto move = [&](int side, const Hex::State& s) {
    const mcts::SearchResult r = (side == 0 ? search0 : search1)->run(s, budget);
    t.add(side, r);
    return rt.bootstrap().allgather_value(r.best)[0];
  };
  const Rounds r = play_rounds(g, o, move);
  if (rt.rank() == 0) add_result(variant, o.board, r, t, rows, opponent);
}

void print_match_table(const std::vector<Row>& rows) {
  bool header = false;
  for (const Row& r : rows) {
    if (r.metric != "win_rate") continue;
    if (!header) std::printf("\n%-40s %8s %16s %6s\n", "match (against local-1t unless named)", "win rate", "95% interval", "games"), header = true;
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
