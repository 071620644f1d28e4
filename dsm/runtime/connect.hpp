#pragma once
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"

namespace loom::runtime {
// Collective: qps[r] is this process's QP to rank r (one per rank). Exchanges endpoints through
// the bootstrap and connects every QP to its peer's QP for this rank.
void connect_all(Bootstrap& boot, const std::vector<fabric::QueuePair*>& qps);
}  // namespace loom::runtime
