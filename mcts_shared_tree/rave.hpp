#pragma once
// RAVE (docs/mcts.md, "RAVE"): all-moves-as-first statistics. A leaf's K playouts each play the
// game to its end; a move of the player to move at a node on the rollout's path counts for that
// node's edge of the move whenever the player holds the move's cell at the end (played in the
// tree below the node or in the playout), and wins when the player won. A game that offers this
// has, beside game.hpp's members,
//
//   int playout_to_end(State&, Rng&) const;        playout() on the state itself, which it fills
//   int held(const State&, int player, Move* out) const;   the moves whose cells the player
//                                                          holds (written to out), how many
//
// Edges keep the counts in their node's AMAF words (NodeLayout::amaf, visits | wins like the
// edge statistics); selection blends them in (select_edge_rave).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "loom/mcts_shared_tree/uct.hpp"

namespace loom::mcts {

template <typename G>
concept AmafGame = requires(const G& g, typename G::State& s, Rng& rng, typename G::Move* out) {
  { g.playout_to_end(s, rng) } -> std::convertible_to<int>;
  { g.held(s, 0, out) } -> std::convertible_to<int>;
};

// A leaf's K playouts as AMAF sees them: per move, the playouts in which Black ended on it and
// those of them Black won. Kept per worker (its vectors sized once per game).
struct AmafCounts {
  uint32_t k = 0, black_wins = 0;
  std::vector<uint16_t> black, black_won;

  void reset(int moves) {
    k = black_wins = 0;
    black.assign(static_cast<size_t>(moves), 0);
    black_won.assign(static_cast<size_t>(moves), 0);
  }
  // The AMAF samples and wins of `player`'s move m, as an EdgeStats word.
  uint64_t word(int player, uint16_t m) const {
    const uint32_t b = black[m], bw = black_won[m];
    if (player == 0) return EdgeStats::word(b, bw);
    // White held m in k - b playouts; White won k - black_wins, of which b - bw with Black on m.
    return EdgeStats::word(k - b, (k - black_wins) - (b - bw));
  }
  // Whether the counts could have come from at most 65,535 playouts (a parser's check: word()
  // cannot wrap, and no word's wins exceed its visits, for either player).
  bool consistent() const {
    if (k > 0xFFFF || black_wins > k || black.size() != black_won.size()) return false;
    for (size_t m = 0; m < black.size(); ++m)
      if (black[m] > k || black_won[m] > black[m] || black_won[m] > black_wins || uint32_t{black[m]} - black_won[m] > k - black_wins) return false;
    return true;
  }
};

// Adds the final position `end` (won by `winner`) to the counts, `times` times.
template <typename G>
void add_ending(const G& g, const typename G::State& end, int winner, uint32_t times, AmafCounts& c) {
  typename G::Move held[kMaxEdges];
  c.k += times;
  c.black_wins += winner == 0 ? times : 0;
  const int n = g.held(end, 0, held);
  for (int i = 0; i < n; ++i) c.black[held[i]] = static_cast<uint16_t>(c.black[held[i]] + times);
  if (winner == 0)
    for (int i = 0; i < n; ++i) c.black_won[held[i]] = static_cast<uint16_t>(c.black_won[held[i]] + times);
}

// A leaf's evaluation with AMAF counts: K playouts from `s` (or, at a finished game, its own
// position K times); Black's wins.
template <AmafGame G>
uint32_t playouts_with_amaf(const G& g, const typename G::State& s, uint32_t k, Rng& rng, AmafCounts& c) {
  c.reset(g.max_moves());
  if (const int over = g.winner(s); over >= 0) {
    add_ending(g, s, over, k, c);
    return c.black_wins;
  }
  for (uint32_t i = 0; i < k; ++i) {
    typename G::State t = s;
    const int w = g.playout_to_end(t, rng);
    add_ending(g, t, w, 1, c);
  }
  return c.black_wins;
}

// A leaf's evaluation as every tree policy makes it: Black's wins of K playouts from `s`
// (`over`: its winner, or -1) and, when `rave` is non-zero for a game that offers AMAF, the
// leaf's counts in `c` (untouched otherwise).
template <typename G>
uint32_t evaluate_leaf(const G& g, const typename G::State& s, int over, uint32_t k, uint32_t rave, Rng& rng, AmafCounts& c) {
  if constexpr (AmafGame<G>)
    if (rave != 0) return playouts_with_amaf(g, s, k, rng, c);
  return leaf_black_wins(g, s, over, k, rng);
}

// The most promising edge under RAVE: with v visits, w wins, a AMAF samples and x AMAF wins,
// beta = a / (v + a + v a / rave), value (1 - beta) w/v + beta x/a, plus UCT's bonus
// c sqrt(ln(total + 1) / (v + 1)); an edge with neither visits nor samples first (a random one).
int best_rave(int n, const float* visits, const float* wins, const float* amaf_visits, const float* amaf_wins, float c2_log_total, float rave);

template <typename StatsOf, typename AmafOf>
int select_edge_rave(int n, StatsOf&& stats, AmafOf&& amaf, double c, uint32_t rave, Rng& rng) {
  alignas(64) float visits[kMaxEdges], wins[kMaxEdges], av[kMaxEdges], aw[kMaxEdges];
  uint64_t total = 0;
  uint32_t blank = 0;
  for (int i = 0; i < n; ++i) {
    const EdgeStats s = stats(i), a = amaf(i);
    visits[i] = static_cast<float>(s.visits), wins[i] = static_cast<float>(s.wins);
    av[i] = static_cast<float>(a.visits), aw[i] = static_cast<float>(a.wins);
    total += s.visits;
    blank += s.visits == 0 && a.visits == 0 ? 1 : 0;
  }
  if (blank != 0) {
    uint32_t k = rng.below(blank);
    for (int i = 0; i < n; ++i)
      if (visits[i] == 0 && av[i] == 0 && k-- == 0) return i;
  }
  if (n == 0) return -1;
  const float log_total = std::log(static_cast<float>(total) + 1.0f);
  return best_rave(n, visits, wins, av, aw, static_cast<float>(c * c) * log_total, static_cast<float>(rave));
}

}  // namespace loom::mcts

namespace loom::mcts {

// Adds a leaf's counts to the AMAF words of every edge of `node` (where `mover` is to move):
// add(word, delta) is the tree policy's way to add to a word of its own.
template <typename Add>
void add_amaf(uint8_t* node, int mover, const AmafCounts& c, Add&& add) {
  const uint32_t n = NodeLayout::edges(node);
  uint64_t* amaf = NodeLayout::amaf(node);
  const uint16_t* moves = NodeLayout::moves(node);
  for (uint32_t e = 0; e < n; ++e)
    if (const uint64_t d = c.word(mover, moves[e]); d != 0) add(amaf[e], d);
}

// A game's fitness for RAVE, checked where a search is made (a clear error, not a failed build
// of every policy for a game without it).
template <typename G>
constexpr bool supports_rave() {
  return AmafGame<G>;
}

}  // namespace loom::mcts
