#pragma once
// A search under a tree policy chosen at run time (docs/mcts.md): the one entry point the engine
// and the benchmark use.
#include <memory>

#include "loom/mcts_shared_tree/cached_tree.hpp"
#include "loom/mcts_shared_tree/invoked_tree.hpp"
#include "loom/mcts_shared_tree/local_tree.hpp"
#include "loom/mcts_shared_tree/root_search.hpp"

namespace loom::mcts {

// `ctx` is needed by owner-invoked and cached-shared (collective construction, every process),
// `rt` by root; local needs neither.
template <typename G>
std::unique_ptr<Search<G>> make_search(TreePolicy p, const G& g, SearchConfig cfg, objects::Context* ctx, Runtime* rt) {
  switch (p) {
    case TreePolicy::Local: return std::make_unique<LocalSearch<G>>(g, cfg);
    case TreePolicy::Root:
      if (rt == nullptr) fail("mcts: the root policy runs under the Loom runtime");
      return std::make_unique<RootSearch<G>>(g, cfg, *rt);
    case TreePolicy::OwnerInvoked:
      if (ctx == nullptr) fail("mcts: the owner-invoked policy needs an objects::Context");
      return std::make_unique<InvokedSearch<G>>(g, cfg, *ctx);
    case TreePolicy::CachedShared:
      if (ctx == nullptr) fail("mcts: the cached-shared policy needs an objects::Context");
      if (cfg.rave != 0) fail("mcts: --rave is for the local, root and owner-invoked trees (cached-shared keeps no AMAF words)");
      return std::make_unique<CachedSearch<G>>(g, cfg, *ctx);
  }
  fail("mcts: unknown tree policy");
}

}  // namespace loom::mcts
