#pragma once
// What the search knows of a game (docs/mcts.md, "Games"): nothing but this. A game is a type G
// with
//
//   using State = ...;          trivially copyable, fixed size (it travels in calls and regions)
//   using Move = uint16_t;      an index below max_moves()
//   int max_moves() const;                       an upper bound on the legal moves of any state
//   State initial() const;
//   int to_move(const State&) const;             0 or 1: the player whose turn it is
//   bool valid(const State&) const;              a state from another process is checked by it
//   int legal_moves(const State&, Move* out) const;   writes them, returns how many
//   void play(State&, Move) const;               the move must be legal
//   int winner(const State&) const;              0 or 1, or -1 while the game goes on
//   int playout(State, Rng&) const;              plays to the end at random; the winner
//   uint64_t hash(const State&) const;
//   std::string move_name(Move) const;  std::optional<Move> parse_move(std::string_view) const;
//   std::string show(const State&) const;
//
// so a second game is one file (mcts_shared_tree/hex.hpp is the first).
#include <cstdint>

namespace loom::mcts {

// xoshiro256** (Blackman and Vigna): fast, 2^256 - 1 period, good enough for playouts.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) w = seed = splitmix(seed);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n) (Lemire's multiply-shift; the bias at n < 2^32 is below 2^-32).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  uint64_t s_[4];
};

}  // namespace loom::mcts
