// loom-calibrate: measures the cost model's components on the fabric at hand and writes the
// calibration file Auto objects read (docs/objects.md, "Cost model").
//   loomrun -n 2 loom-calibrate [--iters N] [--output FILE]
//   loom-calibrate --show [FILE]          prints a calibration file and what the model predicts
#include <cstdio>
#include <cstring>
#include <string>

#include "loom/dsm/common/settings.hpp"
#include "loom/objects/calibrate.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/cost_model.hpp"

using namespace loom;

namespace {

void print_predictions(const objects::Components& c) {
  std::printf("\npredicted us per operation, one at a time (best case):\n%-14s %-7s", "operation", "level");
  for (objects::Policy p : objects::kFixedPolicies) std::printf(" %10s", std::string(objects::name(p)).c_str());
  std::printf("  cheapest\n");
  for (objects::Op op : objects::kOps)
    for (objects::Level l : {objects::Level::Atomic, objects::Level::PhasalWrite}) {
      std::printf("%-14s %-7s", std::string(objects::name(op)).c_str(), std::string(objects::name(l)).c_str());
      for (objects::Policy p : objects::kFixedPolicies) std::printf(" %10.3f", objects::predict(c, op, p, l));
      std::printf("  %s\n", std::string(objects::name(objects::cheapest(c, op, l, objects::kFixedPolicies))).c_str());
    }
}

int show(const std::string& path) {
  const objects::Components c = objects::Components::load(path);
  std::printf("# %s\n%s", path.c_str(), c.serialize().c_str());
  print_predictions(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 5000;
  std::string output;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--show") return show(i + 1 < argc ? argv[i + 1] : objects::calibration_path());
    if (a == "--iters" && i + 1 < argc) iters = static_cast<int>(loom::settings::parse_int(argv[++i], "--iters"));
    else if (a == "--output" && i + 1 < argc) output = argv[++i];
    else {
      std::fprintf(stderr, "usage: loomrun -n 2 loom-calibrate [--iters N] [--output FILE] | loom-calibrate --show [FILE]\n");
      return 2;
    }
  }
  if (iters < 100 || iters > 1000000) {
    std::fprintf(stderr, "loom-calibrate: --iters %d is not in 100..1000000\n", iters);
    return 2;
  }
  Runtime rt(argc, argv);
  if (rt.size() < 2 && rt.rank() == 0) std::fprintf(stderr, "loom-calibrate: alone, every component is measured against this process itself (run it under loomrun -n 2)\n");
  const objects::Components c = [&] {
    objects::Context ctx(rt);
    return objects::measure_components(ctx, iters);
  }();
  if (rt.rank() == 0) {
    const std::string path = output.empty() ? objects::calibration_path() : output;
    c.save(path);
    std::printf("%s", c.serialize().c_str());
    print_predictions(c);
    std::printf("\nwritten to %s\n", path.c_str());
  }
  return 0;
}
