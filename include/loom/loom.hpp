#pragma once
// Every layer of Loom: the substrate, remote invocation, shared regions, distributed objects.
// (The MCTS library is <loom/mcts.hpp>; it links Loom::mcts.)
#include "loom/coherence.hpp"
#include "loom/dsm.hpp"
#include "loom/invoke.hpp"
#include "loom/objects.hpp"
#include "loom/version.hpp"
