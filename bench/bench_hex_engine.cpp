// bench_hex_engine: the Hex engine's enhancements measured by matches against the plain engine
// (uniform playouts, plain UCT at exploration 0.4) at equal time per move, under one tree policy:
//
//   loomrun -n P [--threads T] bench/bench_hex_engine [--quick] [--csv FILE] [--policy P]
//       [--boards N[,N]] [--move-seconds S] [--games N] [--match-rounds R]
//       [--playout uniform|bridge] [--rave K] [--exploration C] [--K K] [--seed S]
//
// The engine measured is the one the flags describe (mcts_shared_tree/options.hpp); the other
// keeps every flag but --playout, --rave and --exploration at their defaults. Each board plays
// every one-stone opening twice, colours swapped, per round. Rows (size = board): variant
// `engine-<playout>[-rave<K>]-<policy>-np<P>-t<T>@vs-plain-equal-time`, metrics win_rate,
// wilson_lo, wilson_hi (95%), games, round_win_rate, rollouts_per_move and
// local_rollouts_per_move (the measured engine's and the plain one's), load_avg.
#include <cstdio>
#include <algorithm>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/mcts_match.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/settings.hpp"
#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/options.hpp"
#include "loom/mcts_shared_tree/policies.hpp"

using namespace loom;
using namespace loom::bench;

namespace {

struct Args {
  bool quick = false, games_given = false;
  std::string csv;
  std::vector<int> boards{9, 11};
  mcts::SearchFlags flags;
  MatchOptions match;
};

std::vector<int> parse_boards(const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  for (std::string b; std::getline(ss, b, ',');) {
    const int64_t n = settings::parse_int(b, "--boards");
    if (n < mcts::Hex::kMinN || n > mcts::Hex::kMaxN) fail("--boards: ", n, " is not in ", mcts::Hex::kMinN, "..", mcts::Hex::kMaxN);
    out.push_back(static_cast<int>(n));
  }
  if (out.empty()) fail("--boards needs a size");
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  a.flags.policy = mcts::TreePolicy::OwnerInvoked;
  a.match.seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--csv" && i + 1 < argc) a.csv = argv[++i];
    else if (s == "--boards" && i + 1 < argc) a.boards = parse_boards(argv[++i]);
    else if (s == "--games" || s == "--move-seconds" || s == "--match-rounds") {
      a.match.board = mcts::Hex::kMaxN;  // --games is checked against each board below
      a.games_given |= s == "--games";
      a.match.take_flag(argc, argv, i);
    } else if (!mcts::take_search_flag(argc, argv, i, a.flags))
      fail("bench_hex_engine: unknown argument ", s, " (--quick, --csv FILE, --boards N[,N], ", MatchOptions::kUsage, ",\n", mcts::search_flags_usage(), ")");
  }
  if (a.quick) a.match.quick(), a.games_given = true, a.match.seconds = std::min(a.match.seconds, 0.05), a.boards = {a.boards.front()};
  return a;
}

std::string engine_name(const mcts::SearchFlags& f) {
  std::string v = "engine-" + std::string(mcts::name(f.playout));
  if (f.search.rave != 0) v += "-rave" + std::to_string(f.search.rave);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_arguments([&] { return parse(argc, argv); });
  Runtime rt(argc, argv);
  objects::Context ctx(rt);
  mcts::SearchConfig strong = a.flags.search, plain = a.flags.search;
  strong.threads = plain.threads = rt.threads_per_process();
  plain.rave = 0, plain.exploration = mcts::SearchConfig{}.exploration;
  plain.seed = strong.seed + 7777;
  const std::string variant = engine_name(a.flags) + "-" + std::string(mcts::name(a.flags.policy)) + "-np" + std::to_string(rt.size()) + "-t" +
                              std::to_string(strong.threads) + "@vs-plain-equal-time";
  std::vector<Row> rows;
  for (int board : a.boards) {
    MatchOptions o = a.match;
    o.board = board;
    o.openings = a.games_given ? std::min(o.openings, board * board) : board * board;
    const mcts::Hex engine(board, a.flags.playout), today(board);
    duel_rows(rt, ctx, Duelist{a.flags.policy, &engine, strong}, Duelist{a.flags.policy, &today, plain}, o, variant, "the plain engine", rows);
    if (rt.rank() == 0) rows.push_back({variant, static_cast<size_t>(board), "load_avg", load_average(), ""});
  }
  if (rt.rank() == 0) {
    std::printf("Hex engine %s against the plain one, %.3f s a move, %d processes x %d threads\n", engine_name(a.flags).c_str(), a.match.seconds,
                rt.size(), strong.threads);
    print_match_table(rows);
    std::printf("load average: %.2f\n", load_average());
    if (!a.csv.empty()) write_csv(a.csv, rows);
  }
  rt.barrier();
  return 0;
}
