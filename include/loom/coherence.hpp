#pragma once
// Shared regions under the coherence protocol (docs/coherence.md): the Space, its regions,
// locks, barriers and atomic words.
#include "loom/coherence/space.hpp"
#include "loom/dsm.hpp"
