// RAVE's pieces (mcts_shared_tree/rave.hpp, rollout_wire.hpp), single process: a leaf's AMAF
// counts from its playouts, the words they give each player, the check a parser makes of
// counts from the wire, selection under RAVE, and the results message that carries them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/rave.hpp"
#include "loom/mcts_shared_tree/rollout_wire.hpp"

using namespace loom::mcts;
using loom::mcts::invoked::Result;
using loom::mcts::invoked::WireCheck;

namespace {

TEST(Rave, ALeafsCountsAreItsPlayoutsEndings) {
  for (HexPlayout p : {HexPlayout::Uniform, HexPlayout::Bridge}) {
    const Hex g(5, p);
    Hex::State s = g.initial();
    g.play(s, *g.parse_move("c3"));  // Black
    g.play(s, *g.parse_move("b2"));  // White
    Rng rng(9);
    AmafCounts c;
    const uint32_t black = playouts_with_amaf(g, s, 64, rng, c);
    EXPECT_EQ(c.k, 64u);
    EXPECT_EQ(c.black_wins, black);
    EXPECT_TRUE(c.consistent());
    // Black's stone is Black's in every ending, White's in none; an empty cell in some of each.
    EXPECT_EQ(c.black[*g.parse_move("c3")], 64);
    EXPECT_EQ(c.black_won[*g.parse_move("c3")], black);
    EXPECT_EQ(c.black[*g.parse_move("b2")], 0);
    EXPECT_GT(c.black[*g.parse_move("e5")], 0);
    EXPECT_LT(c.black[*g.parse_move("e5")], 64);
    // White's view: samples where White held the cell, wins among them.
    const EdgeStats w = EdgeStats::of(c.word(1, *g.parse_move("b2")));
    EXPECT_EQ(w.visits, 64u);
    EXPECT_EQ(w.wins, 64u - black);
  }
}

TEST(Rave, AFinishedGameCountsItsOwnPositionKTimes) {
  const Hex g(3);
  Hex::State s = g.initial();
  for (const char* m : {"a1", "b1", "a2", "b2", "a3"}) g.play(s, *g.parse_move(m));  // Black down column a
  ASSERT_EQ(g.winner(s), 0);
  Rng rng(1);
  AmafCounts c;
  EXPECT_EQ(playouts_with_amaf(g, s, 8, rng, c), 8u);
  EXPECT_EQ(c.black[*g.parse_move("a2")], 8);
  EXPECT_EQ(c.black[*g.parse_move("c3")], 0);  // empty: no one's
  EXPECT_EQ(EdgeStats::of(c.word(1, *g.parse_move("c3"))).visits, 8u - 0u);
}

TEST(Rave, ALeafIsEvaluatedWithCountsOnlyUnderRave) {
  const Hex g(5);
  Hex::State s = g.initial();
  g.play(s, *g.parse_move("c3"));
  AmafCounts c;
  Rng plain(4), with_rave(4), reference(4);
  EXPECT_EQ(evaluate_leaf(g, s, -1, 32, 0, plain, c), playouts_won(g, s, 0, 32, reference));
  EXPECT_EQ(c.k, 0u);  // no counts without RAVE
  const uint32_t black = evaluate_leaf(g, s, -1, 32, 300, with_rave, c);
  EXPECT_EQ(c.k, 32u);
  EXPECT_EQ(c.black_wins, black);
  EXPECT_EQ(leaf_black_wins(g, s, 0, 32, plain), 32u);  // a finished game counts K times
  EXPECT_EQ(leaf_black_wins(g, s, 1, 32, plain), 0u);
}

TEST(Rave, CountsNoPlayoutsCouldGiveAreInconsistent) {
  AmafCounts c;
  c.reset(4);
  c.k = 10, c.black_wins = 6;
  c.black = {10, 4, 0, 5}, c.black_won = {6, 4, 0, 1};
  EXPECT_TRUE(c.consistent());
  auto broken = [&](auto change) {
    AmafCounts d = c;
    change(d);
    return !d.consistent();
  };
  EXPECT_TRUE(broken([](AmafCounts& d) { d.black_wins = 11; }));
  EXPECT_TRUE(broken([](AmafCounts& d) { d.black[2] = 11; }));
  EXPECT_TRUE(broken([](AmafCounts& d) { d.black_won[1] = 5; }));  // more won than held
  EXPECT_TRUE(broken([](AmafCounts& d) { d.black_won[3] = 0; }));  // 5 held and lost, only 4 lost in all
  EXPECT_TRUE(broken([](AmafCounts& d) { d.black_won.pop_back(); }));
  // Found by fuzz_rollout_wire: more won with Black on a cell than Black won in all gave White
  // a word with more wins than visits.
  EXPECT_TRUE(broken([](AmafCounts& d) { d.black_wins = 3, d.black_won = {3, 4, 0, 1}, d.black = {10, 4, 0, 4}; }));
  EXPECT_TRUE(broken([](AmafCounts& d) { d.k = 70000, d.black_wins = 6; })) << "more playouts than u16 counts can hold";
  for (int player : {0, 1})
    for (uint16_t m = 0; m < 4; ++m) {
      const EdgeStats e = EdgeStats::of(c.word(player, m));
      EXPECT_LE(e.wins, e.visits);
      EXPECT_LE(e.visits, c.k);
    }
}

TEST(Rave, SelectionTriesBlankEdgesFirstThenTrustsAmafWhileVisitsAreFew) {
  Rng rng(4);
  // Edge 1 has no visits and no samples: it comes first.
  std::vector<EdgeStats> stats = {{10, 5}, {0, 0}, {10, 5}}, amaf = {{50, 25}, {0, 0}, {50, 45}};
  auto st = [&](int e) { return stats[static_cast<size_t>(e)]; };
  auto am = [&](int e) { return amaf[static_cast<size_t>(e)]; };
  EXPECT_EQ(select_edge_rave(3, st, am, 0.0, 1000, rng), 1);
  // Equal visits and wins: the edge whose AMAF rate is higher.
  stats[1] = {10, 5}, amaf[1] = {50, 10};
  EXPECT_EQ(select_edge_rave(3, st, am, 0.0, 1000, rng), 2);
  // An unvisited edge with good samples beats visited ones with poorer values.
  stats = {{20, 10}, {0, 0}}, amaf = {{40, 20}, {30, 27}};
  EXPECT_EQ(select_edge_rave(2, st, am, 0.0, 1000, rng), 1);
  // With many visits the edge's own rate rules: edge 0 wins more, edge 1's AMAF is better.
  stats = {{100000, 70000}, {100000, 60000}}, amaf = {{1000, 100}, {1000, 900}};
  EXPECT_EQ(select_edge_rave(2, st, am, 0.0, 10, rng), 0);
}

constexpr WireCheck kCheck{7, 4};

AmafCounts some_counts(int moves) {
  AmafCounts c;
  c.reset(moves);
  c.k = 16, c.black_wins = 9;
  for (int m = 0; m < moves; ++m) c.black[static_cast<size_t>(m)] = static_cast<uint16_t>(m % 17), c.black_won[static_cast<size_t>(m)] = static_cast<uint16_t>(std::min(m % 17, 9));
  return c;
}

TEST(Rave, AResultsMessageWithCountsIsParsedBackAsPacked) {
  const std::vector<Result> rs = {{5, 3, 1, 0, 1}, {6, 12, 2, 1, 0}};
  const AmafCounts c = some_counts(25);
  ASSERT_TRUE(c.consistent());
  std::vector<std::byte> msg;
  invoked::pack_results_amaf(msg, 2, kCheck.epoch, std::span<const Result>(rs), c);
  std::vector<Result> got;
  AmafCounts back;
  ASSERT_TRUE(invoked::unpack_results_amaf(std::span<const std::byte>(msg), kCheck, 25, got, back));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].node, 6u);
  EXPECT_EQ(got[0].mover, 1u);
  EXPECT_EQ(back.k, 16u);
  EXPECT_EQ(back.black_wins, 9u);
  EXPECT_EQ(back.black, c.black);
  EXPECT_EQ(back.black_won, c.black_won);
}

TEST(Rave, AResultsMessageWithCountsNotWholeOrInconsistentIsRefused) {
  const std::vector<Result> rs = {{5, 3, 1, 0, 1}};
  std::vector<std::byte> msg;
  invoked::pack_results_amaf(msg, 2, kCheck.epoch, std::span<const Result>(rs), some_counts(25));
  std::vector<Result> got;
  AmafCounts back;
  auto refused = [&](std::vector<std::byte> m, uint32_t moves = 25, WireCheck c = kCheck) {
    return !invoked::unpack_results_amaf(std::span<const std::byte>(m), c, moves, got, back);
  };
  EXPECT_FALSE(refused(msg));
  EXPECT_TRUE(refused(msg, 36)) << "counts for another board";
  EXPECT_TRUE(refused(msg, 25, WireCheck{8, 4})) << "another epoch";
  EXPECT_TRUE(refused(std::vector<std::byte>(msg.begin(), msg.end() - 1))) << "a byte short";
  auto longer = msg;
  longer.push_back(std::byte{0});
  EXPECT_TRUE(refused(longer)) << "a byte over";
  auto mover = msg;
  mover[8 + sizeof(invoked::AmafHeader) + 15] = std::byte{2};  // the Result's mover
  EXPECT_TRUE(refused(mover)) << "a mover 2";
  auto wins = msg;
  const uint32_t too_many = 17;
  std::memcpy(wins.data() + 8 + 12, &too_many, 4);  // black_wins above k
  EXPECT_TRUE(refused(wins)) << "more wins than playouts";
  auto results = msg;
  const uint32_t huge = 1u << 30;
  std::memcpy(results.data() + 8, &huge, 4);
  EXPECT_TRUE(refused(results)) << "a count of results past the bound";
}

}  // namespace
