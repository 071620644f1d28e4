// MCTS for Hex (mcts_shared_tree/) under every tree policy, every process together: openings
// proven winning on 3x3, 4x4 and 5x5 (../shared/data/hex/openings.txt) chosen from the empty
// board at 10^4 rollouts, the unique saving move of four 5x5 positions at 10^3, an immediate win
// taken, and the empty board's root statistics roughly symmetric under a half turn.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "loom/mcts_shared_tree/gtp.hpp"
#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/policies.hpp"
#include "tests/mp_test.hpp"

using loom::mcts::Budget;
using loom::mcts::Hex;
using loom::mcts::SearchConfig;
using loom::mcts::TreePolicy;
using loom::test::rt;

namespace {

// A tree policy, and for owner-invoked the owner protocol too.
struct Variant {
  TreePolicy policy;
  loom::mcts::OwnerProtocol owner = loom::mcts::OwnerProtocol::PathHash;
  loom::mcts::Aggregation aggregation = loom::mcts::Aggregation::Trad;
  loom::mcts::HexPlayout playout = loom::mcts::HexPlayout::Uniform;  // the engine's enhancements:
  uint32_t rave = 0;                                                  // bridge playouts, RAVE
};

class Mcts : public ::testing::TestWithParam<Variant> {
 protected:
  static void SetUpTestSuite() { ctx_ = new loom::objects::Context(rt()); }
  static void TearDownTestSuite() {
    delete ctx_;
    ctx_ = nullptr;
  }
  // The policy's search; `local` runs on rank 0 alone (the others wait).
  std::unique_ptr<loom::mcts::Search<Hex>> search(const Hex& g, uint64_t seed, double exploration = SearchConfig{}.exploration) {
    SearchConfig cfg;
    cfg.seed = seed;
    cfg.exploration = exploration;
    cfg.threads = rt().threads_per_process();
    cfg.owner = GetParam().owner;
    cfg.aggregation = GetParam().aggregation;
    cfg.rave = GetParam().rave;
    return loom::mcts::make_search(GetParam().policy, g, cfg, ctx_, &rt());
  }
  // Hex of size n with the variant's playout policy.
  static Hex game(int n) { return Hex(n, GetParam().playout); }
  bool runs_here() const { return GetParam().policy != TreePolicy::Local || rt().rank() == 0; }
  // Seeds 1..20 from `position`: how many chose a move of `good`. The quality tests ask for 19
  // of 20 (20 of 20 for an immediate win): 700 runs of the openings and saving-move checks
  // (14,000 searches over the four policies, at 2 processes) chose a good move every time, so a
  // search errs with probability below 2.2e-4 (95% bound), and two errors of 20 come by chance
  // with probability below 1e-5 a check.
  int good_choices(const Hex& g, const Hex::State& position, const std::set<std::string>& good, uint64_t rollouts) {
    auto s = search(g, 1000);
    int right = 0;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      if (!runs_here()) continue;
      s = search(g, seed);
      const auto r = s->run(position, Budget{rollouts, 0});
      right += good.count(g.move_name(static_cast<Hex::Move>(r.best)));
    }
    ctx_->process_barrier();
    return right;
  }
  static inline loom::objects::Context* ctx_ = nullptr;
};

std::set<std::string> words(const std::string& list) {
  std::set<std::string> out;
  std::stringstream ss(list);
  for (std::string w; std::getline(ss, w, ',');) out.insert(w);
  return out;
}

// The difference of two win rates in units of its standard error (the pooled binomial one).
double rate_difference_z(double wins_a, double n_a, double wins_b, double n_b) {
  const double p = (wins_a + wins_b) / (n_a + n_b);
  const double se = std::sqrt(p * (1 - p) * (1 / n_a + 1 / n_b));
  return se == 0 ? 0 : (wins_a / n_a - wins_b / n_b) / se;
}

Hex::State position(const Hex& g, const std::string& p1, const std::string& p2) {
  Hex::State s = g.initial();
  for (const auto& m : words(p1)) g.place(s, 0, *g.parse_move(m));
  for (const auto& m : words(p2)) g.place(s, 1, *g.parse_move(m));
  return s;
}

TEST_P(Mcts, OpeningsChosenAreProvenWins) {
  const std::pair<int, const char*> boards[] = {{3, "c1,a2,b2,c2,a3"}, {4, "d1,c2,b3,a4"}, {5, "e1,b2,c2,d2,e2,b3,c3,d3,a4,b4,c4,d4,a5"}};
  for (const auto& [n, winning] : boards) {
    const Hex g = game(n);
    const int right = good_choices(g, g.initial(), words(winning), 10000);
    if (rt().rank() == 0) {
      EXPECT_GE(right, 19) << n << "x" << n << ": " << right << " of 20 seeds chose a winning opening";
    }
  }
}

TEST_P(Mcts, TheOnlySavingMoveIsFound) {
  struct Case {
    const char *p1, *p2, *answer;
  };
  const Case cases[] = {{"d1,a2,a3,c3,b4", "d2,e4,b5,c5,d5", "a5"},
                        {"a2,c2,d4,a5,e5", "b2,e2,b3,d3,a4", "c3"},
                        {"a1,d1,e2,c4,a5", "e1,b2,c2,c3,a4", "d2"},
                        {"e1,a2,c3,a5,b5", "a1,b3,d3,c4,d4", "b4"}};
  const Hex g = game(5);
  for (const Case& c : cases) {
    const int right = good_choices(g, position(g, c.p1, c.p2), {c.answer}, 1000);
    if (rt().rank() == 0) {
      EXPECT_GE(right, 19) << c.p1 << " | " << c.p2 << " -> " << c.answer << ": " << right << " of 20";
    }
  }
}

TEST_P(Mcts, AnImmediateWinIsTaken) {
  const Hex g = game(5);
  // Black holds a1..a4 and c1, White blocks elsewhere: a5 wins at once; nothing else does.
  const Hex::State s = position(g, "a1,a2,a3,a4,c1", "b1,b2,b3,e3,e5");
  const int right = good_choices(g, s, {"a5"}, 1000);
  if (rt().rank() == 0) {
    EXPECT_EQ(right, 20);
  }
}

// A search by time ends on time and has searched: the owner-invoked policy alone in one process
// (every rollout over before the next starts) checked the clock only between rounds of starts
// and never left its first round (a 1 s search ran for minutes and 12 GiB).
TEST_P(Mcts, ASearchByTimeEndsOnTime) {
  const Hex g = game(7);
  auto s = search(g, 5);
  if (runs_here()) {
    const auto r = s->run(g.initial(), Budget{0, 0.2});
    EXPECT_LT(r.seconds, 2.0);
    EXPECT_GT(r.counters.rollouts, 0u);
    EXPECT_GE(r.best, 0);
  }
  ctx_->process_barrier();
}

// A cell and its half-turn (r, c) -> (N-1-r, N-1-c) are worth the same, so their win rates are
// two estimates of one value. With a large exploration constant every cell is tried thousands of
// times (at least 3,400 of 40,000 in 250 pairs measured), and the difference of the two rates,
// in units of its binomial standard error, was spread with variance 1.13 (largest |z| 3.4). The
// bound |z| < 7 fails by chance with probability below 1e-8 per pair even if that variance were
// 1.5 (7 / sqrt(1.5) = 5.7 standard deviations); a cell that lost its image (a wrong half-turn)
// differs by 0.1 or more over thousands of visits, z above 10. The visits of two equal cells
// are not compared: UCT shares them by chance between whichever lead (8,688 and 18,464 seen).
TEST_P(Mcts, TheEmptyBoardLooksTheSameAfterAHalfTurn) {
  // RAVE gives one of two equal cells most visits (d2 416,672 against b4 37,296 seen), and a
  // cell's win rate rises with the search below it (0.634 against 0.606): equal win rates are
  // plain UCT's property, not RAVE's.
  if (GetParam().rave != 0) GTEST_SKIP() << "RAVE shares visits unequally between equal cells";
  const Hex g = game(5);
  auto s = search(g, 99, 2.0);
  if (runs_here()) {
    const auto r = s->run(g.initial(), Budget{40000, 0});
    std::vector<double> visits(25, 0), wins(25, 0);
    for (const auto& e : r.root) visits[e.move] = static_cast<double>(e.visits), wins[e.move] = static_cast<double>(e.wins);
    for (int c = 0; c < 12; ++c) {
      const size_t a = static_cast<size_t>(c), b = static_cast<size_t>(24 - c);
      const std::string pair = g.move_name(static_cast<Hex::Move>(a)) + " and " + g.move_name(static_cast<Hex::Move>(b));
      ASSERT_GT(std::min(visits[a], visits[b]), 100) << pair << ": visits " << visits[a] << " and " << visits[b];
      EXPECT_LT(std::fabs(rate_difference_z(wins[a], visits[a], wins[b], visits[b])), 7.0)
          << pair << ": " << wins[a] << "/" << visits[a] << " and " << wins[b] << "/" << visits[b];
    }
  }
  ctx_->process_barrier();
}

// The cached-shared tree keeps no AMAF words: RAVE there is an error (every process alike, before
// anything collective), not a search that ignores the setting.
TEST_P(Mcts, RaveIsRefusedWhereTheTreeKeepsNoAmafWords) {
  if (GetParam().policy != TreePolicy::CachedShared) GTEST_SKIP() << "the other trees keep AMAF words";
  const Hex g = game(5);
  SearchConfig cfg;
  cfg.rave = 300;
  EXPECT_THROW(loom::mcts::make_search(TreePolicy::CachedShared, g, cfg, ctx_, &rt()), loom::Error);
  ctx_->process_barrier();
}

// Two searches alive at once on one Context (two engines in one program) each search with their
// own tree: the owner-invoked policy found its search through one pointer per process, the
// newest search's, so the first one's calls reached the second, which dropped them as another
// search's, and the first search never ended.
TEST_P(Mcts, TwoSearchesAliveAtOnceEachSearch) {
  const Hex g = game(5);
  auto first = search(g, 11);
  auto second = search(g, 12);
  const Hex::State s = position(g, "a1,a2,a3,a4,c1", "b1,b2,b3,e3,e5");
  for (int round = 0; round < 2; ++round)
    for (auto* one : {first.get(), second.get()}) {
      if (!runs_here()) continue;
      const auto r = one->run(g.initial(), Budget{2000, 0});
      EXPECT_GT(r.counters.rollouts, 0u);
      EXPECT_GE(r.best, 0);
      EXPECT_EQ(g.move_name(static_cast<Hex::Move>(one->run(s, Budget{500, 0}).best)), "a5");
    }
  second.reset();
  if (runs_here()) {
    EXPECT_GT(first->run(g.initial(), Budget{1000, 0}).counters.rollouts, 0u);
  }
  ctx_->process_barrier();
}

// loom-hex's protocol: a scripted session through serve_gtp (rank 0 reads it), bad commands
// included; a refused command leaves the board as it was. `play` takes either colour in any
// order and `genmove` moves the colour it names: a position with more stones of one colour.
TEST_P(Mcts, TheEngineAnswersAScriptedSession) {
  loom::mcts::EngineOptions o;
  o.policy = GetParam().policy;
  o.search.owner = GetParam().owner;
  o.search.aggregation = GetParam().aggregation;
  o.search.rave = GetParam().rave;
  o.playout = GetParam().playout;
  o.board = 5;
  o.budget = Budget{500, 0};
  o.quiet = true;
  loom::mcts::HexEngine engine(o, rt(), ctx_);
  std::istringstream in(
      "1 name\nprotocol_version\nboardsize 4\nboardsize 20\nboardsize 4 5\nplay b a1\nplay b b1\nplay w a1\nplay w e9\nplay white z\n"
      "play green b2\nfrobnicate\n# a comment\n\nshowboard\nundo\nundo\nundo\nloom-budget seconds -1\nloom-budget rollouts 300\n"
      "known_command genmove\nknown_command frobnicate\n7 genmove b\ngenmove b\ngenmove w\nshowboard\nquit\nname\n");
  std::ostringstream out;
  loom::mcts::serve_gtp(engine, rt(), in, out);
  if (rt().rank() != 0) return;
  std::vector<std::string> replies;
  std::string all = out.str();
  for (size_t at = 0, end; (end = all.find("\n\n", at)) != std::string::npos; at = end + 2) replies.push_back(all.substr(at, end - at));
  ASSERT_EQ(replies.size(), 25u) << all;
  EXPECT_EQ(replies[0], "=1 loom-hex");
  EXPECT_EQ(replies[1], "= 2");
  EXPECT_EQ(replies[2], "=");
  EXPECT_EQ(replies[3], "? unacceptable size");
  EXPECT_EQ(replies[4].substr(0, 2), "? ");
  EXPECT_EQ(replies[5], "=");  // play b a1
  EXPECT_EQ(replies[6], "=");  // play b b1: Black twice, as a controller setting up a position may
  EXPECT_EQ(replies[7], "? illegal move: a1 is occupied");
  EXPECT_EQ(replies[8], "? illegal move: 'e9' is not a cell of the board");
  EXPECT_EQ(replies[9], "? illegal move: 'z' is not a cell of the board");
  EXPECT_EQ(replies[10], "? invalid color 'green'");
  EXPECT_EQ(replies[11], "? unknown command");
  // Only a1 and b1 are on the 4x4 board after the refusals.
  EXPECT_EQ(replies[12], "= \n   a  b  c  d \n 1 X  X  .  . \n  2 .  .  .  . \n   3 .  .  .  . \n    4 .  .  .  . ") << replies[12];
  EXPECT_EQ(replies[13], "=");
  EXPECT_EQ(replies[14], "=");
  EXPECT_EQ(replies[15], "? cannot undo");
  EXPECT_EQ(replies[16].substr(0, 2), "? ");
  EXPECT_EQ(replies[17], "=");
  EXPECT_EQ(replies[18], "= true");
  EXPECT_EQ(replies[19], "= false");
  // Black twice on the empty 4x4 board, then White: three different cells, two X and one O.
  const Hex g = game(4);
  std::set<std::string> cells;
  for (size_t i : {20, 21, 22}) {
    const std::string head = i == 20 ? "=7 " : "= ";
    ASSERT_EQ(replies[i].substr(0, head.size()), head) << replies[i];
    EXPECT_TRUE(g.parse_move(replies[i].substr(head.size())).has_value()) << replies[i];
    cells.insert(replies[i].substr(head.size()));
  }
  EXPECT_EQ(cells.size(), 3u);
  EXPECT_EQ(std::count(replies[23].begin(), replies[23].end(), 'X'), 2) << replies[23];
  EXPECT_EQ(std::count(replies[23].begin(), replies[23].end(), 'O'), 1) << replies[23];
  EXPECT_EQ(replies[24], "=");  // quit; nothing after it is read
}

// A budget of fewer rollouts than processes: the root policy split it so that some processes had
// 0 rollouts, which read as "no limit", and the search never ended (np 2 with 1 rollout).
TEST_P(Mcts, ABudgetOfFewerRolloutsThanProcessesIsAnswered) {
  const Hex g = game(5);
  auto s = search(g, 3);
  for (uint64_t rollouts = 1; rollouts <= 3; ++rollouts) {
    if (!runs_here()) continue;
    const auto r = s->run(g.initial(), Budget{rollouts, 0});
    EXPECT_GE(r.best, 0);
    EXPECT_LE(r.counters.rollouts, rollouts + static_cast<uint64_t>(rt().size() * rt().threads_per_process())) << rollouts;
  }
  ctx_->process_barrier();
}

// A position with more stones of one colour searches for the colour named: White to move after
// three Black stones, and White's only block of a5 (Black holds a1-a4) is found.
TEST_P(Mcts, AnUnequalPositionIsSearchedForTheColourNamed) {
  const Hex g = game(5);
  Hex::State s = position(g, "a1,a2,a3,a4", "");
  g.set_to_move(s, 1);
  auto search_white = search(g, 5);
  if (runs_here()) {
    const auto r = search_white->run(s, Budget{2000, 0});
    EXPECT_EQ(g.move_name(static_cast<Hex::Move>(r.best)), "a5");
  }
  ctx_->process_barrier();
}

// Owner-invoked's two owner protocols do what they name: path-hash owners make nodes where
// rollouts reach them (no create-child call, nothing deferred); under random-at-expansion every
// child a worker of another thread is to own is asked for by a create-child call, and the
// rollout that asked waits at the parent (deferred) until the answer, as may others. The search
// ending at all says every deferred rollout went on.
TEST_P(Mcts, OwnersAreMadeAsTheOwnerProtocolSays) {
  if (GetParam().policy != TreePolicy::OwnerInvoked) GTEST_SKIP() << "owner-invoked only";
  const Hex g = game(7);
  auto s = search(g, 5);
  const auto r = s->run(g.initial(), Budget{3000, 0});
  const auto& c = r.counters;
  EXPECT_EQ(c.rollouts, 3000u);
  // Every worker calls someone (the end of the search at least); a trad Aggregator keeps nothing.
  EXPECT_GE(c.pairs_called, static_cast<uint64_t>(rt().size() * rt().threads_per_process() - 1));
  if (GetParam().aggregation == loom::mcts::Aggregation::Trad) {
    EXPECT_EQ(c.kept_calls, 0u);
  }
  EXPECT_LE(c.pairs_kept_over_4k, c.pairs_called);
  if (GetParam().owner == loom::mcts::OwnerProtocol::PathHash || rt().size() * rt().threads_per_process() == 1) {
    EXPECT_EQ(c.creations, 0u);
    EXPECT_EQ(c.deferred, 0u);
  } else {
    EXPECT_GT(c.creations, 10u);
    EXPECT_GE(c.deferred, c.creations) << "the rollout that asks for a child waits for it";
    EXPECT_GT(c.remote_calls, c.creations);
  }
  ctx_->process_barrier();
}

INSTANTIATE_TEST_SUITE_P(Policies, Mcts,
                         ::testing::Values(Variant{TreePolicy::Local}, Variant{TreePolicy::OwnerInvoked},
                                           Variant{TreePolicy::OwnerInvoked, loom::mcts::OwnerProtocol::RandomAtExpansion},
                                           Variant{TreePolicy::OwnerInvoked, loom::mcts::OwnerProtocol::PathHash, loom::mcts::Aggregation::Ovfl},
                                           Variant{TreePolicy::CachedShared}, Variant{TreePolicy::Root},
                                           Variant{TreePolicy::Local, {}, {}, loom::mcts::HexPlayout::Bridge, 300},
                                           Variant{TreePolicy::OwnerInvoked, {}, {}, loom::mcts::HexPlayout::Bridge, 300},
                                           Variant{TreePolicy::Root, {}, {}, loom::mcts::HexPlayout::Uniform, 300}),
                         [](const auto& info) {
                           SearchConfig cfg;
                           cfg.owner = info.param.owner;
                           cfg.aggregation = info.param.aggregation;
                           std::string n = loom::mcts::variant_name(info.param.policy, cfg);
                           if (info.param.playout != loom::mcts::HexPlayout::Uniform) n += "_" + std::string(name(info.param.playout));
                           if (info.param.rave != 0) n += "_rave";
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
