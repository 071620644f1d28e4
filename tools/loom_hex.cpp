// loom-hex: a Hex engine speaking GTP on stdin/stdout (docs/mcts.md, "Playing against it").
//   loomrun --no-prefix -n P [--threads T] loom-hex [--policy P] [--board N] [--seconds S | --rollouts N] [--quiet] ...
// Rank 0 reads the commands; every process searches. Progress goes to stderr once a second.
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "loom/dsm/runtime/runtime.hpp"
#include "loom/mcts_shared_tree/gtp.hpp"
#include "loom/mcts_shared_tree/options.hpp"
#include "loom/objects/context.hpp"

using namespace loom;

int main(int argc, char** argv) {
  mcts::SearchFlags flags;
  bool quiet = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (mcts::take_search_flag(argc, argv, i, flags)) continue;
      if (a == "--quiet") quiet = true;
      else if (a == "-h" || a == "--help") {
        std::printf("usage: loomrun --no-prefix -n P [--threads T] loom-hex [flags]\n%s  --quiet             no progress lines on stderr\n",
                    mcts::search_flags_usage().c_str());
        return 0;
      } else {
        std::fprintf(stderr, "loom-hex: unknown flag %s (--help lists them)\n", a.c_str());
        return 2;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-hex: %s\n", e.what());
    return 2;
  }
  Runtime rt(argc, argv);
  flags.search.threads = rt.threads_per_process();
  std::unique_ptr<objects::Context> ctx;
  if (flags.policy == mcts::TreePolicy::OwnerInvoked || flags.policy == mcts::TreePolicy::CachedShared) ctx = std::make_unique<objects::Context>(rt);
  mcts::HexEngine engine(mcts::EngineOptions{flags.policy, flags.search, flags.budget, flags.board, flags.playout, quiet}, rt, ctx.get());
  mcts::serve_gtp(engine, rt, std::cin, std::cout);
  return 0;
}
