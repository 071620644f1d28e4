// Hex's playout policies (mcts_shared_tree/hex.hpp, hex_playout.cpp), single process: the
// save-bridge answer between two stones and to an edge, a playout that keeps every bridge, and
// the ending a playout leaves (every cell filled, holder() of each).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/mcts_shared_tree/hex.hpp"

using loom::mcts::Hex;
using loom::mcts::HexPlayout;
using loom::mcts::Rng;

namespace {

Hex::Move cell(const Hex& g, const char* name) { return *g.parse_move(name); }

// Stones of each player, then the answer of `player` to `intruder` (already among the stones).
int answer(const Hex& g, std::vector<const char*> black, std::vector<const char*> white, const char* intruder, int player) {
  Hex::State s = g.initial();
  for (const char* b : black) g.place(s, 0, cell(g, b));
  for (const char* w : white) g.place(s, 1, cell(g, w));
  Rng rng(3);
  uint8_t colour[Hex::kColours];
  int16_t empty[Hex::kMaxN * Hex::kMaxN];
  g.colours(s, colour, empty);
  return g.bridge_answer(colour, cell(g, intruder), player, rng);
}

TEST(HexPlayout, AnIntrusionIntoABridgeIsAnsweredInItsOtherCell) {
  const Hex g(5);
  // Black b2 and c3 share the cells c2 and b3: White in one, Black answers in the other.
  EXPECT_EQ(answer(g, {"b2", "c3"}, {"c2"}, "c2", 0), cell(g, "b3"));
  EXPECT_EQ(answer(g, {"b2", "c3"}, {"b3"}, "b3", 0), cell(g, "c2"));
  // No answer when the other cell is taken, or for the player who intruded.
  EXPECT_EQ(answer(g, {"b2", "c3", "b3"}, {"c2"}, "c2", 0), -1);
  EXPECT_EQ(answer(g, {"b2", "c3"}, {"c2"}, "c2", 1), -1);
  // One stone alone next to the intrusion is no bridge.
  EXPECT_EQ(answer(g, {"b2"}, {"c2"}, "c2", 0), -1);
}

TEST(HexPlayout, ABridgeToTheOwnEdgeIsSavedAndTheOthersEdgeIsNoStone) {
  const Hex g(5);
  // Black c2 reaches the top edge by c1 or d1.
  EXPECT_EQ(answer(g, {"c2"}, {"c1"}, "c1", 0), cell(g, "d1"));
  EXPECT_EQ(answer(g, {"c2"}, {"d1"}, "d1", 0), cell(g, "c1"));
  // White b3 reaches the left edge by a3 or a4.
  EXPECT_EQ(answer(g, {"a3"}, {"b3"}, "a3", 1), cell(g, "a4"));
  // The left edge is White's: Black b3 has no bridge to it.
  EXPECT_EQ(answer(g, {"b3"}, {"a3"}, "a3", 0), -1);
}

// Black c2, b4 and the carriers between them and the edges empty — c1/d1 to the top, b3/c3
// between them, a5/b5 to the bottom — White on every other cell, White to move: a connection
// every intrusion can be answered in, and nothing else to play (so no other bridge of Black's
// competes for an answer).
Hex::State bridged_chain(const Hex& g) {
  Hex::State s = g.initial();
  g.place(s, 0, cell(g, "c2"));
  g.place(s, 0, cell(g, "b4"));
  const std::vector<std::string> carriers = {"c1", "d1", "b3", "c3", "a5", "b5"};
  for (int m = 0; m < g.max_moves(); ++m) {
    const auto mv = static_cast<Hex::Move>(m);
    if (g.empty(s, mv) && std::find(carriers.begin(), carriers.end(), g.move_name(mv)) == carriers.end()) g.place(s, 1, mv);
  }
  g.set_to_move(s, 1);
  return s;
}

TEST(HexPlayout, BridgePlayoutsKeepAConnectionMadeOfBridgesUniformOnesDoNot) {
  const Hex bridge(5, HexPlayout::Bridge), uniform(5, HexPlayout::Uniform);
  Rng rng(11);
  int bridge_black = 0, uniform_black = 0;
  for (int t = 0; t < 2000; ++t) {
    bridge_black += bridge.playout(bridged_chain(bridge), rng) == 0 ? 1 : 0;
    uniform_black += uniform.playout(bridged_chain(uniform), rng) == 0 ? 1 : 0;
  }
  EXPECT_EQ(bridge_black, 2000);
  EXPECT_LT(uniform_black, 2000);
}

TEST(HexPlayout, APlayoutToTheEndFillsEveryCellAndReportsItsWinner) {
  Rng rng(5);
  for (HexPlayout p : {HexPlayout::Uniform, HexPlayout::Bridge})
    for (int n : {3, 7, 11, 19}) {
      const Hex g(n, p);
      for (int t = 0; t < 200; ++t) {
        Hex::State s = g.initial();
        g.play(s, static_cast<Hex::Move>(rng.below(static_cast<uint32_t>(n * n))));
        const int w = g.playout_to_end(s, rng);
        ASSERT_TRUE(g.valid(s)) << name(p) << " " << n;
        ASSERT_EQ(s.placed, n * n);
        for (int m = 0; m < n * n; ++m) ASSERT_GE(g.holder(s, static_cast<Hex::Move>(m)), 0);
        ASSERT_EQ(g.winner(s), w) << name(p) << " " << n << ":\n" << g.show(s);
      }
    }
}

TEST(HexPlayout, PoliciesAreNamedAndABadNameIsAnError) {
  EXPECT_EQ(loom::mcts::parse_hex_playout("bridge"), HexPlayout::Bridge);
  EXPECT_EQ(loom::mcts::parse_hex_playout("uniform"), HexPlayout::Uniform);
  EXPECT_EQ(name(HexPlayout::Bridge), "bridge");
  EXPECT_THROW(loom::mcts::parse_hex_playout("bridges"), loom::Error);
}

}  // namespace
