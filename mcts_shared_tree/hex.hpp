#pragma once
// Hex on an N x N board, N = 3..19 (docs/mcts.md, "Hex"): player 0 (Black) connects the top row
// to the bottom row and moves first; player 1 (White) connects the left column to the right
// column; no swap. Cell (r, c) — row r from the top, column c from the left, both from 0 — is
// named column letter + row number ("a1" top-left) and has index r*N + c. Its neighbours are
// (r,c-1), (r,c+1), (r-1,c), (r-1,c+1), (r+1,c-1), (r+1,c).
//
// A state keeps each player's stones as one bit mask per row (bit c = column c). A random
// playout fills the empty cells at random in one go (a partial shuffle picks the side to move's
// share) and asks once who connected: a full board has exactly one winner (the Hex theorem), so
// one flood fill of Black's stones from the top row decides it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "loom/mcts_shared_tree/game.hpp"

namespace loom::mcts {

class Hex {
 public:
  static constexpr int kMinN = 3, kMaxN = 19;
  struct State {
    uint32_t stones[2][kMaxN];  // [player][row]
    uint16_t placed;
    uint8_t n;
    uint8_t mover;  // the player whose turn it is: the one who did not place the last stone
  };
  using Move = uint16_t;

  explicit Hex(int n);
  int size() const { return n_; }
  int max_moves() const { return n_ * n_; }
  State initial() const;
  int to_move(const State& s) const { return s.mover; }
  // Whether `s` is a position of this board (a state from another process is checked first):
  // stones on cells of the board only, no cell held by both, the count right, a mover 0 or 1.
  bool valid(const State& s) const;
  // Hands the turn to `player` (GTP's genmove of the colour not to move; a set-up position).
  void set_to_move(State& s, int player) const { s.mover = static_cast<uint8_t>(player); }
  int legal_moves(const State& s, Move* out) const;
  bool empty(const State& s, Move m) const { return ((s.stones[0][m / n_] | s.stones[1][m / n_]) >> (m % n_) & 1u) == 0; }
  void play(State& s, Move m) const { place(s, to_move(s), m); }
  // A stone of `player`, in any order (setting up a position): the other player moves next.
  void place(State& s, int player, Move m) const {
    s.stones[player][m / n_] |= 1u << (m % n_);
    ++s.placed;
    s.mover = static_cast<uint8_t>(1 - player);
  }
  // 0 or 1 when a player has connected, else -1.
  int winner(const State& s) const {
    if (connects(s.stones[0], true)) return 0;
    if (connects(s.stones[1], false)) return 1;
    return -1;
  }
  int playout(State s, Rng& rng) const;
  uint64_t hash(const State& s) const;
  std::string move_name(Move m) const;
  std::optional<Move> parse_move(std::string_view text) const;
  std::string show(const State& s) const;

  // Black's rows connect the top to the bottom (top_bottom), or White's the left to the right.
  bool connects(const uint32_t* rows, bool top_bottom) const;

 private:
  uint32_t full() const { return (n_ == 32 ? 0u : (1u << n_)) - 1u; }
  int n_;
};

}  // namespace loom::mcts
