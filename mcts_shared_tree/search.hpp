#pragma once
// A search from a position under a tree policy (docs/mcts.md): `local` (one process, its
// threads share one tree), `owner-invoked` (every node has an owner; a rollout continues at a
// child's owner by a call), `cached-shared` (the tree in a shared region; every worker descends
// all of it on its cached copies), `root` (independent trees, root statistics summed).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/mcts_shared_tree/uct.hpp"

namespace loom::objects {
class Context;
}

namespace loom::mcts {

enum class TreePolicy : uint8_t { Local, OwnerInvoked, CachedShared, Root };
// "local", "owner-invoked", "cached-shared", "root"
std::string_view name(TreePolicy p);
TreePolicy parse_tree_policy(std::string_view s);
// "path-hash", "random-at-expansion"
std::string_view name(OwnerProtocol o);
OwnerProtocol parse_owner_protocol(std::string_view s);
// "trad", "ovfl"
std::string_view name(Aggregation a);
Aggregation parse_aggregation(std::string_view s);
// A policy's name in benchmark rows: name(p); owner-invoked under random-at-expansion
// "owner-invoked-random", with ovfl aggregation "-ovfl" after.
std::string variant_name(TreePolicy p, const SearchConfig& cfg);

struct RootEdge {
  uint16_t move;
  uint64_t visits, wins;  // playouts through the move, and the mover's wins
};

struct SearchResult {
  int best = -1;           // the move with the most playouts (-1: no legal move)
  double win_rate = 0;     // the side to move's wins through it
  double seconds = 0;
  RolloutCounters counters;
  std::vector<RootEdge> root;
};

// A running search as rank 0 sees it, about once a second (the engine's progress lines).
struct Progress {
  double seconds = 0;
  uint64_t rollouts = 0;   // this process's (all processes' where the policy knows them)
  uint64_t max_depth = 0;  // of this process's rollouts
  std::vector<RootEdge> root;
};
using ProgressFn = std::function<void(const Progress&)>;

// Says when the next report is due: a second after the last (steady clock).
class ProgressClock {
 public:
  explicit ProgressClock(bool on) : on_(on), start_(std::chrono::steady_clock::now()), next_(start_ + std::chrono::seconds(1)) {}
  // True once a second; then seconds() is the time since the search started.
  bool due() {
    if (!on_) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return false;
    next_ = now + std::chrono::seconds(1);
    seconds_ = std::chrono::duration<double>(now - start_).count();
    return true;
  }
  double seconds() const { return seconds_; }

 private:
  bool on_;
  std::chrono::steady_clock::time_point start_, next_;
  double seconds_ = 0;
};

// A move of the side to move that wins at once, or -1.
template <typename G>
int winning_move(const G& g, const typename G::State& s) {
  typename G::Move legal[kMaxEdges];
  if (g.winner(s) >= 0) return -1;
  const int n = g.legal_moves(s, legal), me = g.to_move(s);
  for (int i = 0; i < n; ++i) {
    typename G::State t = s;
    g.play(t, legal[i]);
    if (g.winner(t) == me) return legal[i];
  }
  return -1;
}

template <typename G>
class Search {
 public:
  explicit Search(const G& g) : game_(g) {}
  virtual ~Search() = default;
  // Distributed policies: collective, every process with the same position and budget; the
  // rollout budget counts the whole job's rollouts. A move that wins at once is played without
  // a search (every process finds it alike).
  SearchResult run(const typename G::State& position, Budget budget) {
    if (const int m = winning_move(game_, position); m >= 0) {
      SearchResult r;
      r.best = m;
      r.win_rate = 1;
      return r;
    }
    return search(position, budget);
  }
  // Called about once a second during run(), at rank 0 only, on one of its search threads.
  void set_progress(ProgressFn f) { progress_ = std::move(f); }

 protected:
  virtual SearchResult search(const typename G::State& position, Budget budget) = 0;
  const G& game_;
  ProgressFn progress_;
};

}  // namespace loom::mcts
