#pragma once
// Tree-parallel Monte-Carlo Tree Search for Hex under four tree policies (docs/mcts.md).
#include "loom/mcts_shared_tree/game.hpp"
#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/options.hpp"
#include "loom/mcts_shared_tree/search.hpp"
#include "loom/objects.hpp"
