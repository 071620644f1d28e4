#include "loom/mcts_shared_tree/search.hpp"

#include <algorithm>
#include <cmath>

#include "loom/dsm/common/error.hpp"
#include "loom/mcts_shared_tree/local_tree.hpp"

namespace loom::mcts {

std::string_view name(TreePolicy p) {
  switch (p) {
    case TreePolicy::Local: return "local";
    case TreePolicy::OwnerInvoked: return "owner-invoked";
    case TreePolicy::CachedShared: return "cached-shared";
    case TreePolicy::Root: return "root";
  }
  return "?";
}

TreePolicy parse_tree_policy(std::string_view s) {
  for (TreePolicy p : {TreePolicy::Local, TreePolicy::OwnerInvoked, TreePolicy::CachedShared, TreePolicy::Root})
    if (s == name(p)) return p;
  fail("mcts: unknown tree policy '", std::string(s), "' (local, owner-invoked, cached-shared, root)");
}

std::string_view name(Aggregation a) { return a == Aggregation::Trad ? "trad" : "ovfl"; }

Aggregation parse_aggregation(std::string_view s) {
  for (Aggregation a : {Aggregation::Trad, Aggregation::Ovfl})
    if (s == name(a)) return a;
  fail("mcts: unknown aggregation '", std::string(s), "' (trad, ovfl)");
}

std::string_view name(OwnerProtocol o) { return o == OwnerProtocol::PathHash ? "path-hash" : "random-at-expansion"; }

OwnerProtocol parse_owner_protocol(std::string_view s) {
  for (OwnerProtocol o : {OwnerProtocol::PathHash, OwnerProtocol::RandomAtExpansion})
    if (s == name(o)) return o;
  fail("mcts: unknown owner protocol '", std::string(s), "' (path-hash, random-at-expansion)");
}

std::string variant_name(TreePolicy p, const SearchConfig& cfg) {
  std::string v(name(p));
  if (p == TreePolicy::OwnerInvoked && cfg.owner == OwnerProtocol::RandomAtExpansion) v += "-random";
  if (p == TreePolicy::OwnerInvoked && cfg.aggregation == Aggregation::Ovfl) v += "-ovfl";
  return v;
}

void RolloutCounters::add(const RolloutCounters& o) {
  rollouts += o.rollouts, playouts += o.playouts, depth_sum += o.depth_sum;
  max_depth = std::max(max_depth, o.max_depth);
  remote_calls += o.remote_calls, messages += o.messages, bytes += o.bytes;
  misses += o.misses, invalidations += o.invalidations, vl_collisions += o.vl_collisions;
  edges_read += o.edges_read, bytes_fetched += o.bytes_fetched, released_blocks += o.released_blocks;
  worker_cpu_ns += o.worker_cpu_ns, edges_summed += o.edges_summed;
  deferred += o.deferred, creations += o.creations;
  kept_calls += o.kept_calls, pairs_called += o.pairs_called, pairs_kept_over_4k += o.pairs_kept_over_4k;
}

// Built with -fno-math-errno (CMakeLists.txt): the square roots and divisions vectorize.
int best_uct(int n, const float* visits, const float* wins, float c2_log_total) {
  alignas(64) float score[kMaxEdges];
  for (int i = 0; i < n; ++i) {
    const float inv = 1.0f / visits[i];
    score[i] = wins[i] * inv + std::sqrt(c2_log_total * inv);
  }
  int pick = 0;
  for (int i = 1; i < n; ++i)
    if (score[i] > score[pick]) pick = i;
  return pick;
}

int best_rave(int n, const float* visits, const float* wins, const float* amaf_visits, const float* amaf_wins, float c2_log_total, float rave) {
  alignas(64) float score[kMaxEdges];
  for (int i = 0; i < n; ++i) {
    const float v = visits[i], a = amaf_visits[i];
    const float beta = a / (v + a + v * a / rave + 1e-9f);
    const float q = v > 0 ? wins[i] / v : 0.0f, amaf = a > 0 ? amaf_wins[i] / a : 0.0f;
    score[i] = (1.0f - beta) * q + beta * amaf + std::sqrt(c2_log_total / (v + 1.0f));
  }
  int pick = 0;
  for (int i = 1; i < n; ++i)
    if (score[i] > score[pick]) pick = i;
  return pick;
}

int most_visited(int n, const uint64_t* stats) {
  int best = -1;
  uint32_t most = 0;
  for (int i = 0; i < n; ++i)
    if (EdgeStats::of(stats[i]).visits > most) most = EdgeStats::of(stats[i]).visits, best = i;
  return best;
}

SearchResult summarize(std::vector<RootEdge> root, RolloutCounters rc, double seconds) {
  SearchResult r;
  r.seconds = seconds;
  r.counters = rc;
  uint64_t most = 0;
  for (const RootEdge& e : root)
    if (e.visits > most) {
      most = e.visits;
      r.best = e.move;
      r.win_rate = static_cast<double>(e.wins) / static_cast<double>(e.visits);
    }
  r.root = std::move(root);
  return r;
}

}  // namespace loom::mcts
