#pragma once
// bench_mcts --match: a tree policy against local-1t (one process, one thread) on 9x9, every
// one-stone opening played twice with the colours swapped, at equal rollouts per move and at
// equal wall time per move. Rows: variant `<policy>-np<P>-t<T>@equal-rollouts` or
// `@equal-time`, size 9, metrics win_rate, wilson_lo, wilson_hi (95%), games (over every
// round), and round_win_rate (one row per round).
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/search.hpp"
#include "loom/objects/context.hpp"

namespace loom::bench {

struct MatchOptions {
  int board = 9;
  int openings = 81;        // the first `openings` cells as Black's first stone (each twice)
  uint64_t rollouts = 1000;  // per move, at equal rollouts
  double seconds = 0.02;     // per move, at equal time
  // Whole matches per condition, each with the searches' seeds where the last left them: a
  // condition's rows pool them all (162 games a round), and each round is printed too.
  int rounds = 1;
  // The playout policy of both sides' games (bench_mcts's --playout; a duel names its own).
  mcts::HexPlayout playout = mcts::HexPlayout::Uniform;
  // Parses --games N, --move-rollouts R, --move-seconds S, --match-rounds R at argv[i] (advancing i).
  bool take_flag(int argc, char** argv, int& i);
  static constexpr const char* kUsage = "--games N, --move-rollouts R, --move-seconds S, --match-rounds R";
  void quick() { openings = std::min(openings, 4), rounds = 1; }

};

// The 95% Wilson score interval of `wins` in `n`.
std::pair<double, double> wilson(double wins, double n);

// Collective: every process plays every game (rank 0 alone plays local-1t's moves).
// The yardstick: local-1t with twice the budget against local-1t, at both budgets (rank 0
// alone) — what twice the rollouts, or twice the time, is worth at these budgets.
void reference_rows(const MatchOptions& o, mcts::SearchConfig cfg, std::vector<Row>& rows);
void match_rows(Runtime& rt, objects::Context& ctx, mcts::TreePolicy p, mcts::SearchConfig cfg, const MatchOptions& o, std::vector<Row>& rows);
// Collective: owner-invoked under random-at-expansion (side 0) against owner-invoked under
// path-hash at equal time per move, both searched by every process. Rows: variant
// `owner-invoked-random-np<P>-t<T>@vs-path-hash-equal-time`, the metrics above.
void owners_match_rows(Runtime& rt, objects::Context& ctx, mcts::SearchConfig cfg, const MatchOptions& o, std::vector<Row>& rows);
// One side of a duel: a search under `policy` of a game (the playout policy is the game's).
struct Duelist {
  mcts::TreePolicy policy;
  const mcts::Hex* game;
  mcts::SearchConfig cfg;
};
// Collective: side 0 against side 1 at equal time per move on o.board (the rules: both games
// are Hex of that size), both searched by every process; rows of `variant` as above.
void duel_rows(Runtime& rt, objects::Context& ctx, const Duelist& side0, const Duelist& side1, const MatchOptions& o, const std::string& variant,
               const char* opponent, std::vector<Row>& rows);
void print_match_table(const std::vector<Row>& rows);

}  // namespace loom::bench
