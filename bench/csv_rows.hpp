#pragma once
// The rows every Loom benchmark writes (variant,size,metric,value,unit), without the runtime:
// bench_rpipe_mpi, which is an MPI program, writes them too.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace loom::bench {

struct Row {
  std::string variant;
  size_t size;
  std::string metric;
  double value;
  std::string unit;
};

inline void write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "variant,size,metric,value,unit\n";
  for (auto& r : rows) f << r.variant << ',' << r.size << ',' << r.metric << ',' << r.value << ',' << r.unit << '\n';
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace loom::bench
