// Hex (mcts_shared_tree/hex.hpp), single process: the winner against a plain BFS over cells on
// random boards (full and partial), cell names, the board's edges and corners, and what a
// random playout fills.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/mcts_shared_tree/hex.hpp"

using loom::mcts::Hex;
using loom::mcts::Rng;

namespace {

// The reference: breadth-first search over cells with the six neighbours of the rules.
bool bfs_connects(const Hex::State& s, int n, int player) {
  auto mine = [&](int r, int c) { return (s.stones[player][r] >> c & 1u) != 0; };
  std::vector<char> seen(static_cast<size_t>(n * n), 0);
  std::deque<std::pair<int, int>> q;
  for (int i = 0; i < n; ++i) {
    const int r = player == 0 ? 0 : i, c = player == 0 ? i : 0;
    if (mine(r, c)) q.emplace_back(r, c), seen[static_cast<size_t>(r * n + c)] = 1;
  }
  const int dr[] = {0, 0, -1, -1, 1, 1}, dc[] = {-1, 1, 0, 1, -1, 0};
  while (!q.empty()) {
    auto [r, c] = q.front();
    q.pop_front();
    if ((player == 0 && r == n - 1) || (player == 1 && c == n - 1)) return true;
    for (int k = 0; k < 6; ++k) {
      const int rr = r + dr[k], cc = c + dc[k];
      if (rr < 0 || rr >= n || cc < 0 || cc >= n || !mine(rr, cc) || seen[static_cast<size_t>(rr * n + cc)]) continue;
      seen[static_cast<size_t>(rr * n + cc)] = 1;
      q.emplace_back(rr, cc);
    }
  }
  return false;
}

int bfs_winner(const Hex::State& s, int n) {
  if (bfs_connects(s, n, 0)) return 0;
  if (bfs_connects(s, n, 1)) return 1;
  return -1;
}

TEST(Hex, WinnerMatchesABreadthFirstSearchOnRandomBoards) {
  Rng rng(12345);
  int full = 0, partial = 0;
  for (int t = 0; t < 100000; ++t) {
    const int n = 3 + static_cast<int>(rng.below(17));
    Hex g(n);
    Hex::State s = g.initial();
    // Full boards half of the time (exactly one winner), else a random stopping point.
    const int stop = t % 2 == 0 ? n * n : static_cast<int>(rng.below(static_cast<uint32_t>(n * n + 1)));
    Hex::Move moves[Hex::kMaxN * Hex::kMaxN];
    for (int k = 0; k < stop; ++k) {
      const int m = g.legal_moves(s, moves);
      g.play(s, moves[rng.below(static_cast<uint32_t>(m))]);
    }
    const int want = bfs_winner(s, n);
    ASSERT_EQ(g.winner(s), want) << "board " << t << ", " << n << "x" << n << ":\n" << g.show(s);
    if (stop == n * n) {
      ASSERT_NE(want, -1) << "a full board without a winner:\n" << g.show(s);
    }
    if (t % 2 == 0) ++full;
    else partial += want == -1 ? 1 : 0;
  }
  EXPECT_EQ(full, 50000);
  EXPECT_GT(partial, 5000);  // many partial boards had no winner yet
}

TEST(Hex, APlayoutFillsTheBoardFairlyAndItsWinnerIsTheReferences) {
  Rng rng(7);
  for (int n : {3, 5, 11, 19}) {
    Hex g(n);
    Hex::State s = g.initial();
    int black = 0;
    for (int t = 0; t < 2000; ++t) black += g.playout(s, rng) == 0 ? 1 : 0;
    // The first player wins more often at random on an empty board, never always.
    EXPECT_GT(black, 900) << n;
    EXPECT_LT(black, 2000) << n;
  }
  // Black a1 and a2, White b1 and b2, Black to move: a playout wins for Black when it gives
  // Black a3 (or another way through), not always.
  Hex g(3);
  Hex::State s = g.initial();
  for (const char* m : {"a1", "b1", "a2", "b2"}) g.play(s, *g.parse_move(m));  // Black a1, a2; White b1, b2
  int black = 0;
  for (int t = 0; t < 1000; ++t) black += g.playout(s, rng) == 0 ? 1 : 0;
  EXPECT_GT(black, 0);
  EXPECT_LT(black, 1000);
}

TEST(Hex, CellsAreNamedColumnLetterAndRowNumber) {
  Hex g(11);
  EXPECT_EQ(g.move_name(0), "a1");
  EXPECT_EQ(g.move_name(10), "k1");
  EXPECT_EQ(g.move_name(11), "a2");
  EXPECT_EQ(g.move_name(120), "k11");
  EXPECT_EQ(g.parse_move("k11"), std::optional<Hex::Move>(120));
  EXPECT_EQ(g.parse_move("C3"), std::optional<Hex::Move>(2 * 11 + 2));
  for (const char* bad : {"", "a", "a0", "l1", "a12", "11", "aa", "a1x", "pass"}) EXPECT_FALSE(g.parse_move(bad).has_value()) << bad;
  EXPECT_THROW(Hex(2), loom::Error);
  EXPECT_THROW(Hex(20), loom::Error);
}

TEST(Hex, EdgesDecideWhoConnects) {
  Hex g(4);
  Hex::State s = g.initial();
  // Black down column b: b1 b2 b3 b4 connects top and bottom; White's stones elsewhere.
  for (const char* m : {"b1", "a1", "b2", "a2", "b3", "a3"}) g.play(s, *g.parse_move(m));
  EXPECT_EQ(g.winner(s), -1);
  g.play(s, *g.parse_move("b4"));
  EXPECT_EQ(g.winner(s), 0);
  // White along row 2 from a2 to d2 connects left and right.
  Hex::State w = g.initial();
  for (const char* m : {"a1", "a2", "b1", "b2", "c1", "c2", "a4", "d2"}) g.play(w, *g.parse_move(m));
  EXPECT_EQ(g.winner(w), 1);
  // The acute corner a1 touches two cells only: (r,c+1) and (r+1,c).
  Hex::State d = g.initial();
  for (const char* m : {"a1", "d4", "a2", "d3", "b1", "d1"}) g.play(d, *g.parse_move(m));
  EXPECT_EQ(g.winner(d), -1);
}

}  // namespace
