#include "bench/nas/kernel.hpp"

#include <cctype>
#include <cmath>

namespace loom::nas {

const std::vector<Kernel>& kernels() {
  static const std::vector<Kernel> k = {
      {"ep", run_ep, ep_shared_bytes}, {"cg", run_cg, cg_shared_bytes}, {"is", run_is, is_shared_bytes},
      {"mg", run_mg, mg_shared_bytes}, {"ft", run_ft, ft_shared_bytes}, {"bt", run_bt, bt_shared_bytes},
  };
  return k;
}

const Kernel* find_kernel(const std::string& name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Kernel& k : kernels())
    if (n == k.name) return &k;
  return nullptr;
}

char parse_class(const std::string& s) {
  if (s.size() != 1) return 0;
  const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return c == 'S' || c == 'W' || c == 'A' || c == 'B' ? c : 0;
}

bool check_relative(const char* what, double got, double want, double tol, std::vector<std::string>& details) {
  const double err = std::fabs(got - want) / std::fabs(want);
  const bool ok = err <= tol;  // false for NaN
  char line[200];
  std::snprintf(line, sizeof line, "%-10s %22.15e  reference %22.15e  error %9.3e  %s", what, got, want, err, ok ? "ok" : "FAILED");
  details.emplace_back(line);
  return ok;
}

void print_summary(const Result& r, int processes, int threads, const std::string& backend) {
  std::printf("\n %s Benchmark Completed.\n", r.kernel.c_str());
  std::printf(" Class           = %24c\n", r.cls);
  std::printf(" Size            = %24s\n", r.size.c_str());
  std::printf(" Iterations      = %24d\n", r.iterations);
  std::printf(" Time in seconds = %24.4f\n", r.seconds);
  std::printf(" Back end        = %24s\n", backend.c_str());
  std::printf(" Processes       = %24d\n", processes);
  std::printf(" Threads/process = %24d\n", threads);
  std::printf(" Mop/s total     = %24.2f\n", r.mops);
  std::printf(" Operation type  = %24s\n", r.operation.c_str());
  std::printf(" Verification    = %24s\n", r.verified ? "SUCCESSFUL" : "UNSUCCESSFUL");
  for (const std::string& d : r.details) std::printf("   %s\n", d.c_str());
  std::fflush(stdout);
}

}  // namespace loom::nas
