#pragma once
// The command-line flags loom-hex and bench_mcts share (docs/mcts.md, "Settings"):
//
//   --policy local|owner-invoked|cached-shared|root   --board N (3..19)
//   --rollouts N | --seconds S       the budget of one search
//   --K K  --exploration C  --expand-at N  --virtual-loss N  --in-flight N  --sync-every N
//   --owner path-hash|random-at-expansion  --aggregation trad|ovfl
//   --seed S
//   --playout uniform|bridge         Hex's playout policy (the game's playout hints)
//   --rave K                         RAVE's equivalence parameter (0: plain UCT)
//
// Worker threads per process are the runtime's (loomrun --threads T).
#include <string>

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/search.hpp"

namespace loom::mcts {

struct SearchFlags {
  TreePolicy policy = TreePolicy::Local;
  SearchConfig search;
  Budget budget{0, 1.0};
  int board = 11;
  HexPlayout playout = HexPlayout::Uniform;
};

// If argv[i] is one of the flags above, takes it and its value (advancing i) and returns true;
// a bad value is an error that names the flag and what it accepts.
bool take_search_flag(int argc, char** argv, int& i, SearchFlags& f);
// The flags' lines for a usage message.
std::string search_flags_usage();

}  // namespace loom::mcts
