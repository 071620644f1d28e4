#pragma once
// The whole-program benchmark of the shared regions: a 2-D Jacobi sweep written as a new user
// would (two arrays in one region, rows split among the processes, a barrier after each sweep,
// default 4 KiB blocks, plain loads and stores), beside the same loop in one plain process and
// on two OpenMP threads, measured in the same run.
#include <string>
#include <vector>

#include "bench/bench_common.hpp"

namespace loom::bench {

struct JacobiOptions {
  std::vector<int> sizes = {512, 2048};
  int sweeps = 50;
  int reps = 3;
};

// Collective. Returns the rows (rank 0's figures; other ranks get an empty vector) and prints
// a table with the ratios.
std::vector<Row> jacobi_benchmark(Runtime& rt, const JacobiOptions& opt);

}  // namespace loom::bench
