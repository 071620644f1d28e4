#pragma once
// The search's shared pieces (docs/mcts.md, "Search"): settings, the node layout every tree
// policy stores (its own memory, a region, an owner's pool), UCT selection with virtual loss,
// and a leaf's evaluation. Statistics live on the edges of the parent (Seriema's layout): one
// node holds everything its selection reads.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "loom/mcts_shared_tree/game.hpp"

namespace loom::mcts {

// How the owner-invoked tree places a node (docs/mcts.md, "owner-invoked"): at the worker its
// path's hash names (ids computed by everyone, no call to create a node), or at a worker chosen
// at random when the node is expanded (Seriema's protocol: a create-child call, the parent
// notified of the child, selections deferred at the parent meanwhile).
enum class OwnerProtocol : uint8_t { PathHash, RandomAtExpansion };
// The owner-invoked tree's Aggregators (invoke::Aggregator's modes, seed 000 §4.4.2): calls
// batched into 4 KiB records (trad), or sent one by one and kept only while a ring is full (ovfl).
enum class Aggregation : uint8_t { Trad, Ovfl };

struct SearchConfig {
  double exploration = 0.4;   // UCT's constant c (win rates in [0, 1])
  uint32_t playouts = 16;     // K random playouts per leaf
  uint32_t expand_at = 2;     // an edge's child becomes a node once the edge has seen this many rollouts
  uint32_t virtual_loss = 1;  // rollouts counted lost on an edge while a rollout is below it
  int threads = 1;            // workers per process
  uint32_t in_flight = 64;    // rollouts in flight per worker of the job (owner-invoked)
  OwnerProtocol owner = OwnerProtocol::PathHash;  // owner-invoked
  Aggregation aggregation = Aggregation::Trad;     // owner-invoked
  uint32_t sync_every = 8192;      // rollouts between a process's publications (cached-shared)
  size_t region_block = 64 << 10;  // the tree region's block size (cached-shared)
  // RAVE (Gelly and Silver): an edge's value blends its own win rate with its all-moves-as-first
  // rate, weighted beta = a / (v + a + v a / rave) for v visits and a AMAF samples; 0: plain UCT.
  uint32_t rave = 0;
  uint64_t seed = 1;
};

// A budget: whichever limit comes first (0: none).
struct Budget {
  uint64_t rollouts = 0;
  double seconds = 0;
};

// The rollouts a budget stands for: its count, or its seconds at `rate` (rollouts per second of
// the last search; 0 when none ran yet, and then 0). Policies size their sharing intervals by
// it: a short search shares often, a long one rarely.
inline uint64_t expected_rollouts(Budget b, double rate) {
  return b.rollouts != 0 ? b.rollouts : static_cast<uint64_t>(rate * b.seconds);
}

// An edge's statistics in one word: playouts through it (high half) and the wins of the player
// who made its move (low half). One fetch_add updates both.
struct EdgeStats {
  uint32_t visits = 0, wins = 0;
  static EdgeStats of(uint64_t w) { return {static_cast<uint32_t>(w >> 32), static_cast<uint32_t>(w)}; }
  static constexpr uint64_t word(uint64_t visits, uint64_t wins) { return visits << 32 | wins; }
};

// A node: [edges | pad][stats x n][child x n][amaf x n][in flight x n][move x n], 8-byte
// aligned. child[i] is 0 until edge i's child is a node, then the child's reference (its meaning
// is the tree policy's); amaf[i] is edge i's all-moves-as-first word (rave.hpp; zero without
// RAVE); in flight counts the rollouts below edge i now (a second one is a virtual-loss
// collision).
struct NodeLayout {
  static size_t bytes(int edges) {
    const size_t n = static_cast<size_t>(edges);
    return (8 + n * 8 * 3 + n * 4 + n * 2 + 7) & ~size_t{7};
  }
  static uint32_t edges(const uint8_t* node) { return *reinterpret_cast<const uint32_t*>(node); }
  static uint64_t* stats(uint8_t* node) { return reinterpret_cast<uint64_t*>(node + 8); }
  static uint64_t* children(uint8_t* node) { return stats(node) + edges(node); }
  static uint64_t* amaf(uint8_t* node) { return children(node) + edges(node); }
  static uint32_t* in_flight(uint8_t* node) { return reinterpret_cast<uint32_t*>(amaf(node) + edges(node)); }
  static uint16_t* moves(uint8_t* node) { return reinterpret_cast<uint16_t*>(in_flight(node) + edges(node)); }
  // Writes a fresh node for `n` moves into `mem` (bytes(n) of it, zeroed).
  static void make(uint8_t* mem, int n, const uint16_t* legal) {
    std::memset(mem, 0, bytes(n));
    *reinterpret_cast<uint32_t*>(mem) = static_cast<uint32_t>(n);
    std::memcpy(moves(mem), legal, static_cast<size_t>(n) * 2);
  }
};

// What one rollout did, for the benchmark's per-rollout figures.
struct RolloutCounters {
  uint64_t rollouts = 0, playouts = 0, depth_sum = 0, max_depth = 0;
  uint64_t remote_calls = 0, messages = 0, bytes = 0, misses = 0, invalidations = 0, vl_collisions = 0;
  uint64_t edges_read = 0;  // edges the selections read (the sum of the nodes' edge counts along each path)
  uint64_t bytes_fetched = 0, released_blocks = 0;  // cached-shared: block data fetched, blocks released
  uint64_t edges_summed = 0;  // cached-shared: edges whose other processes' words were summed (once a node and synchronization)
  uint64_t worker_cpu_ns = 0;  // the search's worker threads' CPU time
  uint64_t creations = 0, deferred = 0;  // owner-invoked random-at-expansion: create-child calls, selections deferred
  // owner-invoked: calls an ovfl Aggregator kept (its ring full); (worker, destination) pairs
  // called, and those whose kept calls once held more than one 4 KiB record's worth
  uint64_t kept_calls = 0, pairs_called = 0, pairs_kept_over_4k = 0;
  void add(const RolloutCounters& o);
};

// The most promising edge by UCT: win rate + sqrt(c2_log_total / visits) with c2_log_total =
// c^2 ln(total + 1), over edges that all have visits (single precision, one vectorized pass;
// search.cpp).
int best_uct(int n, const float* visits, const float* wins, float c2_log_total);

inline constexpr int kMaxEdges = 1024;  // the most moves a node may have

// UCT over a node's edges as `stats(i)` reads them (each policy reads its own way): the edge
// with the highest win rate plus exploration bonus; an unvisited edge first (a random one).
// The loop runs over every edge of every node a rollout passes (most of a rollout's time
// outside its playouts), so the edges are read once into arrays the bonus loop vectorizes over.
template <typename StatsOf>
int select_edge(int n, StatsOf&& stats, double c, Rng& rng) {
  alignas(64) float visits[kMaxEdges], wins[kMaxEdges];
  uint64_t total = 0;
  uint32_t unvisited = 0;
  for (int i = 0; i < n; ++i) {
    const EdgeStats s = stats(i);
    visits[i] = static_cast<float>(s.visits);
    wins[i] = static_cast<float>(s.wins);
    total += s.visits;
    unvisited += s.visits == 0 ? 1 : 0;
  }
  if (unvisited != 0) {  // a random unvisited edge
    uint32_t k = rng.below(unvisited);
    for (int i = 0; i < n; ++i)
      if (visits[i] == 0 && k-- == 0) return i;
  }
  if (n == 0) return -1;
  const float log_total = std::log(static_cast<float>(total) + 1.0f);
  return best_uct(n, visits, wins, static_cast<float>(c * c) * log_total);
}

// The edge with the most playouts (the move a search plays), -1 if none was visited.
int most_visited(int n, const uint64_t* stats);

// A leaf's value: K playouts from `s` (a game still going on); the wins of `player`.
template <typename G>
uint32_t playouts_won(const G& g, const typename G::State& s, int player, uint32_t k, Rng& rng) {
  uint32_t wins = 0;
  for (uint32_t i = 0; i < k; ++i) wins += g.playout(s, rng) == player ? 1 : 0;
  return wins;
}

// Black's wins of K playouts from `s`, whose winner is `over` (-1 while the game goes on: then
// K playouts; a finished game counts K times for its winner).
template <typename G>
uint32_t leaf_black_wins(const G& g, const typename G::State& s, int over, uint32_t k, Rng& rng) {
  return over >= 0 ? (over == 0 ? k : 0) : playouts_won(g, s, 0, k, rng);
}

}  // namespace loom::mcts
