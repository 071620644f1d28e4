#pragma once
// Which transport each pair of ranks uses, said once at start-up (LOOM_LOG=info, rank 0) and by
// loom-info run under loomrun: the hosts and their ranks, shared memory within a host, the
// device between hosts, and for small jobs the matrix of every pair.
#include <string>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/runtime/job_layout.hpp"

namespace loom::runtime {

// "ranks 0-3" (consecutive runs joined: "ranks 0-1, 4-5").
std::string rank_list(const std::vector<int>& ranks);

// Several lines, each starting with two spaces.
std::string describe_transports(const JobLayout& layout, const fabric::Provider& provider, int self);

}  // namespace loom::runtime
