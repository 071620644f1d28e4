// bench_nas: the NAS kernels on Loom beside their OpenMP build, in one run (docs/nas.md).
//   bench_nas [--quick] [--classes S,W,A] [--kernels ep,cg,is,mg,ft,bt] [--np 1,2]
//             [--policies floating-ts,...] [--loom-threads 1] [--omp-threads 1,2] [--reps N]
//             [--emulate-nodes 2,4] [--no-loomp] [--csv FILE]
// Under LOOM_WIRE (docs/wire.md) the Loom variants run over the emulated wire, split over each
// of --emulate-nodes' node counts (default: a node per rank), and their names gain
// "@<wire>-nodes<K>"; the OpenMP variants are as without it.
// For each kernel and class, every variant (omp-t<T>, loom-<policy>-np<P>-t<T>, and loomp-np<P>-t<T>:
// the OpenMP build unmodified on Loom's OpenMP layer) runs as its own program (nas_omp; nas_loom
// and nas_loomp under loomrun), the variants interleaved in a balanced order, each
// repeated. Rows: variant, size (<kernel>.<class>), metric (seconds, mops, verified, and the
// DSM counters of Loom runs), value (median over repeats; verified = 1 iff every run verified),
// unit, and the load average over the runs. Exits 1 if any run failed verification.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/nas/args.hpp"

namespace {

struct Options {
  std::vector<std::string> kernels = {"ep", "cg", "is", "mg", "ft", "bt"};
  std::vector<std::string> classes = {"S", "W", "A"};
  std::vector<int> np = {1, 2};
  std::vector<std::string> policies = {"floating-ts", "floating-dir", "fixed-ts", "fixed-dir"};
  std::vector<int> loom_threads = {1};
  std::vector<int> omp_threads = {1, 2};
  std::vector<int> emulate_nodes;  // under LOOM_WIRE; empty: a node per rank
  bool loomp = true;               // the loomp-np<P>-t<T> rows (--no-loomp: none)
  int reps = 3;
  std::string csv;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  if (out.empty()) throw std::invalid_argument("empty list '" + s + "'");
  return out;
}

std::vector<int> split_ints(const std::string& s, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& item : split(s)) out.push_back(loom::nas::parse_int(item, lo, hi, "a number"));
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") {
      o.classes = {"S", "W"};
      o.reps = 1;
    } else if (a == "--classes") o.classes = split(value());
    else if (a == "--kernels") o.kernels = split(value());
    else if (a == "--np") o.np = split_ints(value(), 1, 64);
    else if (a == "--policies") o.policies = split(value());
    else if (a == "--no-loomp") o.loomp = false;
    else if (a == "--loom-threads") o.loom_threads = split_ints(value(), 1, 64);
    else if (a == "--omp-threads") o.omp_threads = split_ints(value(), 1, 256);
    else if (a == "--reps") o.reps = split_ints(value(), 1, 1000).front();
    else if (a == "--emulate-nodes") o.emulate_nodes = split_ints(value(), 1, 64);
    else if (a == "--csv") o.csv = value();
    else throw std::invalid_argument("unknown option '" + a + "'");
  }
  if (!o.emulate_nodes.empty() && loom::bench::wire_name().empty())
    throw std::invalid_argument("--emulate-nodes needs an emulated wire: set LOOM_WIRE (docs/wire.md)");
  for (const std::string& c : o.classes)
    if (c != "S" && c != "W" && c != "A" && c != "B") throw std::invalid_argument("no class '" + c + "'");
  for (const std::string& k : o.kernels)
    if (loom::nas::find_kernel(k) == nullptr) throw std::invalid_argument("no kernel '" + k + "'");
  for (const std::string& p : o.policies)
    if (p != "floating-ts" && p != "floating-dir" && p != "fixed-ts" && p != "fixed-dir") throw std::invalid_argument("no policy '" + p + "'");
  return o;
}

struct Variant {
  std::string name;     // omp-t2, loom-fixed-dir-np2-t1
  std::string command;  // without kernel and class
  bool loom = false;
};

std::vector<Variant> variants(const Options& o, const std::string& dir) {
  std::vector<Variant> v;
  for (int t : o.omp_threads) v.push_back({"omp-t" + std::to_string(t), dir + "/nas_omp {} --threads " + std::to_string(t), false});
  const std::string wire = loom::bench::wire_name();
  for (int np : o.np)
    for (int nodes : o.emulate_nodes.empty() ? std::vector<int>{np} : o.emulate_nodes) {
      if (nodes > np) continue;
      const std::string suffix = wire.empty() ? "" : "@" + wire + "-nodes" + std::to_string(nodes);
      const std::string launch = dir + "/../../loomrun --no-prefix --timeout 1200 -n " + std::to_string(np) +
                                 (wire.empty() ? "" : " --emulate-nodes " + std::to_string(nodes));
      for (int t : o.loom_threads) {
        for (const std::string& p : o.policies)
          v.push_back({"loom-" + p + "-np" + std::to_string(np) + "-t" + std::to_string(t) + suffix,
                       launch + " --threads " + std::to_string(t) + " " + dir + "/nas_loom {} --policy " + p, true});
        // The OpenMP back end, unmodified, on Loom's OpenMP layer (default policy), its heap
        // sized for the problem ({heap}).
        if (o.loomp)
          v.push_back({"loomp-np" + std::to_string(np) + "-t" + std::to_string(t) + suffix,
                       "LOOM_OMP_HEAP={heap} " + launch + " --threads " + std::to_string(t) + " " + dir + "/nas_loomp {} --threads " +
                           std::to_string(np * t),
                       true});
      }
    }
  return v;
}

// One run's figures, parsed from the NPB summary ("Time in seconds = ...") and the DSM line.
struct Run {
  std::map<std::string, double> metrics;
  bool verified = false;
  bool complete = false;
};

Run run(const std::string& command) {
  Run r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot start: " + command);
  char buf[4096];
  std::string out;
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    const std::string line = buf;
    out += line;
    auto field = [&](const char* key) -> const char* {
      const size_t at = line.find(key);
      if (at == std::string::npos) return nullptr;
      const size_t eq = line.find('=', at);
      return eq == std::string::npos ? nullptr : line.c_str() + eq + 1;
    };
    if (const char* v = field(" Time in seconds")) r.metrics["seconds"] = std::atof(v);
    if (const char* v = field(" Mop/s total")) r.metrics["mops"] = std::atof(v);
    if (const char* v = field(" Verification")) {
      r.verified = std::string(v).find("SUCCESSFUL") != std::string::npos && std::string(v).find("UNSUCCESSFUL") == std::string::npos;
      r.complete = true;
    }
    if (line.find(" DSM counters") != std::string::npos) {
      std::stringstream ss(line.substr(line.find('=') + 1));
      for (std::string kv; ss >> kv;) {
        const size_t eq = kv.find('=');
        if (eq != std::string::npos) r.metrics[kv.substr(0, eq)] = std::atof(kv.c_str() + eq + 1);
      }
    }
  }
  const int status = pclose(p);
  if (!r.complete || (status != 0 && r.verified)) {
    std::fprintf(stderr, "bench_nas: '%s' ended without a summary (status %d):\n%s\n", command.c_str(), status, out.c_str());
    r.verified = false;
  }
  return r;
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string s(buf, static_cast<size_t>(n));
  return s.substr(0, s.rfind('/'));
}

// The OpenMP layer's heap for a problem: rank 0's half holds three times the kernel's shared
// arrays (with the kernels' other allocations) and 32 MiB more, in whole 64 MiB.
std::string heap_for(const std::string& kernel, char cls) {
  constexpr size_t kUnit = size_t{64} << 20;
  const size_t shared = loom::nas::find_kernel(kernel)->shared_bytes(cls, 1);
  const size_t half = 3 * shared + kUnit / 2;
  return std::to_string((2 * half + kUnit - 1) / kUnit * (kUnit >> 20)) + "M";
}

std::string with_problem(std::string command, const std::string& kernel, const std::string& cls) {
  command.replace(command.find("{}"), 2, kernel + " " + cls);
  if (const size_t at = command.find("{heap}"); at != std::string::npos) command.replace(at, 6, heap_for(kernel, cls[0]));
  return command;
}

}  // namespace

using loom::bench::load_average;
using loom::bench::median;

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_nas: %s\n", e.what());
    return 2;
  }
  const std::vector<Variant> vs = variants(o, self_dir());
  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    csv << "variant,size,metric,value,unit,load\n";
  }
  bool all_verified = true;
  std::printf("%-10s %-40s %10s %10s %8s %8s %6s %6s\n", "problem", "variant", "seconds", "Mop/s", "/omp-t1", "/omp-t2", "ok", "load");
  for (const std::string& k : o.kernels)
    for (const std::string& c : o.classes) {
      const std::string size = k + "." + c;
      std::vector<std::vector<Run>> runs(vs.size());
      std::vector<double> loads(vs.size(), 0.0);
      for (int rep = 0; rep < o.reps; ++rep)
        for (int i : loom::bench::balanced_order(static_cast<int>(vs.size()), rep)) {
          loads[static_cast<size_t>(i)] += load_average() / o.reps;
          runs[static_cast<size_t>(i)].push_back(run(with_problem(vs[static_cast<size_t>(i)].command, k, c)));
        }
      std::map<std::string, double> base;  // omp-t1, omp-t2 medians
      std::vector<std::map<std::string, double>> medians(vs.size());
      std::vector<bool> ok(vs.size(), true);
      for (size_t i = 0; i < vs.size(); ++i) {
        std::map<std::string, std::vector<double>> all;
        for (const Run& r : runs[i]) {
          ok[i] = ok[i] && r.verified;
          for (const auto& [m, v] : r.metrics) all[m].push_back(v);
        }
        for (const auto& [m, v] : all) medians[i][m] = median(v);
        if (!vs[i].loom) base[vs[i].name] = medians[i]["seconds"];
        all_verified = all_verified && ok[i];
      }
      for (size_t i = 0; i < vs.size(); ++i) {
        const double s = medians[i]["seconds"];
        auto ratio = [&](const char* b) { return base.count(b) && s > 0 ? base[b] / s : 0.0; };
        std::printf("%-10s %-40s %10.4f %10.1f %8.2f %8.2f %6s %6.1f\n", size.c_str(), vs[i].name.c_str(), s, medians[i]["mops"], ratio("omp-t1"),
                    ratio("omp-t2"), ok[i] ? "yes" : "NO", loads[i]);
        if (!csv.is_open()) continue;
        csv << vs[i].name << ',' << size << ",verified," << (ok[i] ? 1 : 0) << ",bool," << loads[i] << '\n';
        for (const auto& [m, v] : medians[i])
          csv << vs[i].name << ',' << size << ',' << m << ',' << v << ',' << (m == "seconds" ? "s" : m == "mops" ? "Mop/s" : m == "bytes_fetched" ? "B" : "count") << ','
              << loads[i] << '\n';
      }
      std::fflush(stdout);
    }
  if (!o.csv.empty()) std::printf("wrote %s\n", o.csv.c_str());
  if (!all_verified) std::fprintf(stderr, "bench_nas: some runs did not verify\n");
  return all_verified ? 0 : 1;
}
