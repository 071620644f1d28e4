// Hex's bridge playout (hex.hpp, "bridge"): random moves, save-bridge answers.
#include <bit>
#include <cstring>

#include "loom/mcts_shared_tree/hex.hpp"

namespace loom::mcts {

namespace {
constexpr uint8_t kEmpty = 2, kNobody = 3;
// Bits d of a six-bit ring, turned one place up (bit d from bit d-1) or down (from bit d+1).
constexpr uint32_t turn_up(uint32_t x) { return ((x << 1) | (x >> 5)) & 63u; }
constexpr uint32_t turn_down(uint32_t x) { return ((x >> 1) | (x << 5)) & 63u; }
}  // namespace

// A bridge of `player` through `intruder` is two of the player's stones (or a stone and the
// player's edge) that are both neighbours of `intruder` and of an empty cell x beside it: in
// turning order around `intruder`, x at direction d and the two at d-1 and d+1. One pass over
// the six neighbours makes a ring of the player's and one of the empty; x is where both of its
// ring neighbours are the player's. (Edges are never empty, so x is a cell.)
int Hex::bridge_answer(const uint8_t* colour, int intruder, int player, Rng& rng) const {
  const uint16_t* nb = neighbours(intruder);
  uint32_t mine = 0, empty = 0;
  for (int d = 0; d < 6; ++d) {
    const uint8_t c = colour[nb[d]];
    mine |= static_cast<uint32_t>(c == player) << d;
    empty |= static_cast<uint32_t>(c == kEmpty) << d;
  }
  uint32_t answers = empty & turn_up(mine) & turn_down(mine);
  if (answers == 0) return -1;
  for (int k = std::popcount(answers) == 1 ? 0 : static_cast<int>(rng.below(static_cast<uint32_t>(std::popcount(answers)))); k > 0; --k)
    answers &= answers - 1;
  return nb[std::countr_zero(answers)];
}

int Hex::colours(const State& s, uint8_t* colour, int16_t* empty) const {
  int m = 0;
  for (int r = 0; r < n_; ++r)
    for (int c = 0; c < n_; ++c) {
      const int i = r * n_ + c;
      colour[i] = s.stones[0][r] >> c & 1u ? 0 : s.stones[1][r] >> c & 1u ? 1 : kEmpty;
      if (colour[i] == kEmpty) empty[m++] = static_cast<int16_t>(i);
    }
  colour[black_edge()] = 0, colour[white_edge()] = 1, colour[no_cell()] = kNobody;
  return m;
}

// Move by move: the empty cells in a list (swap-remove keeps it dense, `where` finds a cell in
// it), each move a save-bridge answer to the move before it if there is one, else a random cell.
int Hex::bridge_playout(State& s, Rng& rng) const {
  uint8_t colour[kColours];
  int16_t cells[kMaxN * kMaxN], where[kMaxN * kMaxN];
  int m = colours(s, colour, cells);
  for (int i = 0; i < m; ++i) where[cells[i]] = static_cast<int16_t>(i);
  int mover = to_move(s), last = -1;
  while (m > 0) {
    int pick = last >= 0 ? bridge_answer(colour, last, mover, rng) : -1;
    if (pick < 0) pick = cells[rng.below(static_cast<uint32_t>(m))];
    const int16_t moved = cells[--m];
    cells[where[pick]] = moved, where[moved] = where[pick];
    colour[pick] = static_cast<uint8_t>(mover);
    last = pick, mover ^= 1;
  }
  for (int r = 0, i = 0; r < n_; ++r) {
    uint32_t black = 0;
    for (int c = 0; c < n_; ++c, ++i) black |= static_cast<uint32_t>(colour[i] == 0) << c;
    s.stones[0][r] = black, s.stones[1][r] = full() & ~black;
  }
  s.placed = static_cast<uint16_t>(n_ * n_);
  return connects(s.stones[0], true) ? 0 : 1;
}

}  // namespace loom::mcts
