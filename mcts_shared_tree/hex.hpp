#pragma once
// Hex on an N x N board, N = 3..19 (docs/mcts.md, "Hex"): player 0 (Black) connects the top row
// to the bottom row and moves first; player 1 (White) connects the left column to the right
// column; no swap. Cell (r, c) — row r from the top, column c from the left, both from 0 — is
// named column letter + row number ("a1" top-left) and has index r*N + c. Its neighbours are
// (r,c-1), (r,c+1), (r-1,c), (r-1,c+1), (r+1,c-1), (r+1,c).
//
// A state keeps each player's stones as one bit mask per row (bit c = column c). A playout fills
// every empty cell and asks once who connected: a full board has exactly one winner (the Hex
// theorem), so one flood fill of Black's stones from the top row decides it. Two playout policies
// (the game's playout hints, chosen at run time):
//
//   uniform  the empty cells at random in one go (a partial shuffle picks the side to move's share)
//   bridge   move by move at random, except that a move intruding into a bridge of the player to
//            move next is answered in the bridge's other cell (MoHex's save-bridge pattern; a
//            stone's bridge to its own edge counts) — the playout keeps the connections a player
//            already holds, as a player would (hex_playout.cpp)
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "loom/mcts_shared_tree/game.hpp"

namespace loom::mcts {

enum class HexPlayout : uint8_t { Uniform, Bridge };
// "uniform", "bridge"
std::string_view name(HexPlayout p);
HexPlayout parse_hex_playout(std::string_view s);

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

  explicit Hex(int n, HexPlayout playout = HexPlayout::Uniform);
  int size() const { return n_; }
  HexPlayout playout_policy() const { return playout_; }
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
  // Plays `s` to the end under the playout policy; the winner.
  int playout(State s, Rng& rng) const { return playout_to_end(s, rng); }
  // The playout on `s` itself: every empty cell filled (rave.hpp's AmafGame).
  int playout_to_end(State& s, Rng& rng) const { return playout_ == HexPlayout::Bridge ? bridge_playout(s, rng) : uniform_playout(s, rng); }
  int uniform_playout(State& s, Rng& rng) const;
  int bridge_playout(State& s, Rng& rng) const;
  // The cells `player` holds in `s` (rave.hpp's AmafGame), how many.
  int held(const State& s, int player, Move* out) const {
    int k = 0;
    for (int r = 0; r < n_; ++r)
      for (uint32_t b = s.stones[player][r]; b != 0; b &= b - 1) out[k++] = static_cast<Move>(r * n_ + __builtin_ctz(b));
    return k;
  }
  // The player whose stone is on m, or -1.
  int holder(const State& s, Move m) const {
    const uint32_t bit = 1u << (m % n_);
    return s.stones[0][m / n_] & bit ? 0 : s.stones[1][m / n_] & bit ? 1 : -1;
  }
  // The cell a player answers in when the other has just played `intruder` into one of the
  // player's bridges, -1 if none; one of several at random. `colour` per cell: 0 or 1 a
  // player's stone, 2 empty; then 0, 1, 3 (Black's edge, White's, nothing) (hex_playout.cpp).
  int bridge_answer(const uint8_t* colour, int intruder, int player, Rng& rng) const;
  // That colour array of `s` (kColours entries); returns the empty cells written to `empty`.
  static constexpr int kColours = kMaxN * kMaxN + 3;
  int colours(const State& s, uint8_t* colour, int16_t* empty) const;
  uint64_t hash(const State& s) const;
  std::string move_name(Move m) const;
  std::optional<Move> parse_move(std::string_view text) const;
  std::string show(const State& s) const;

  // Black's rows connect the top to the bottom (top_bottom), or White's the left to the right.
  bool connects(const uint32_t* rows, bool top_bottom) const;

 private:
  uint32_t full() const { return (n_ == 32 ? 0u : (1u << n_)) - 1u; }
  // Cell i's six neighbours in turning order (up, up-right, right, down, down-left, left): a
  // cell, or past the cells the index of Black's edge, White's edge, or nothing (off a corner)
  // in the playout's colour array, which holds each of them after the cells.
  int black_edge() const { return n_ * n_; }
  int white_edge() const { return n_ * n_ + 1; }
  int no_cell() const { return n_ * n_ + 2; }
  const uint16_t* neighbours(int cell) const { return &neighbours_[cell * 6]; }
  int n_;
  HexPlayout playout_;
  uint16_t neighbours_[kMaxN * kMaxN * 6];
};

}  // namespace loom::mcts
