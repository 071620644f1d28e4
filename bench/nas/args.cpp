#include "bench/nas/args.hpp"

#include <stdexcept>

namespace loom::nas {

int parse_int(const std::string& s, int lo, int hi, const std::string& what) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || v < lo || v > hi)
    throw std::invalid_argument(what + ": want " + std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + s + "'");
  return v;
}

RunArgs parse_run_args(int argc, char** argv, bool omp) {
  const std::string usage = std::string("usage: ") + (omp ? "nas_omp" : "loomrun -n P [--threads T] nas_loom") +
                            " <ep|cg|is|mg|ft> <S|W|A|B>" + (omp ? " [--threads T]" : " [--policy floating-ts|floating-dir|fixed-ts|fixed-dir]");
  RunArgs a;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--help" || s == "-h") throw std::invalid_argument(usage);
    if ((s == "--threads" && omp) || (s == "--policy" && !omp)) {
      if (i + 1 >= argc) throw std::invalid_argument(s + " needs a value\n" + usage);
      const std::string v = argv[++i];
      if (s == "--policy") {
        a.policy = v;
        continue;
      }
      a.threads = parse_int(v, 1, 256, "--threads");
    } else if (positional == 0) {
      a.kernel = find_kernel(s);
      if (a.kernel == nullptr) throw std::invalid_argument("no kernel '" + s + "'\n" + usage);
      ++positional;
    } else if (positional == 1) {
      a.cls = parse_class(s);
      if (a.cls == 0) throw std::invalid_argument("no class '" + s + "' (S, W, A or B)\n" + usage);
      ++positional;
    } else {
      throw std::invalid_argument("unexpected argument '" + s + "'\n" + usage);
    }
  }
  if (positional < 2) throw std::invalid_argument(usage);
  return a;
}

}  // namespace loom::nas
