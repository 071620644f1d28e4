// The Jacobi stencil on the shared regions (bench/README.md, "Whole programs"): every policy at
// the run's process count, against the plain loop and two OpenMP threads. Each result is checked
// against the plain loop's, bit for bit (the same operations in the same order).
#include "bench/coherence_jacobi.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "loom/coherence/space.hpp"

namespace loom::bench {
namespace {

using coherence::Policy;
using coherence::Space;

const char* const kPolicies[] = {"floating-ts", "floating-dir", "fixed-ts", "fixed-dir"};
constexpr int kNumPolicies = 4;

// Rows [lo, hi) of the interior of b from a.
void sweep_rows(const double* a, double* b, size_t n, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i)
    for (size_t j = 1; j + 1 < n; ++j)
      b[i * n + j] = 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1] + a[i * n + j + 1]);
}

// Rows [lo, hi) of both arrays: 1 on the top edge, 0 elsewhere.
void init_rows(double* a, double* b, size_t n, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i)
    for (size_t j = 0; j < n; ++j) a[i * n + j] = b[i * n + j] = i == 0 ? 1.0 : 0.0;
}

// Process (or thread) p of P owns rows [lo, hi) of the n rows; it sweeps their interior part.
struct Rows {
  size_t lo, hi, sweep_lo, sweep_hi;
  Rows(size_t n, int p, int parts)
      : lo(n * static_cast<size_t>(p) / static_cast<size_t>(parts)),
        hi(n * static_cast<size_t>(p + 1) / static_cast<size_t>(parts)),
        sweep_lo(lo < 1 ? 1 : lo),
        sweep_hi(hi > n - 1 ? n - 1 : hi) {}
};

double checksum(const double* a, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n * n; ++i) s += a[i] * static_cast<double>(i % 7 + 1);
  return s;
}

double run_plain(size_t n, int sweeps, double* sum) {
  std::vector<double> va(n * n), vb(n * n);
  double *a = va.data(), *b = vb.data();
  init_rows(a, b, n, 0, n);
  auto t0 = clk::now();
  for (int s = 0; s < sweeps; ++s) {
    sweep_rows(a, b, n, 1, n - 1);
    std::swap(a, b);
  }
  double sec = seconds_since(t0);
  *sum = checksum(a, n);
  return sec;
}

// The runtime pins each process's main thread to one core when the cores suffice; the OpenMP
// baseline gets every core, as a program of its own would.
class AllCores {
 public:
  AllCores() {
    sched_getaffinity(0, sizeof saved_, &saved_);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &all);
    sched_setaffinity(0, sizeof all, &all);
  }
  ~AllCores() { sched_setaffinity(0, sizeof saved_, &saved_); }

 private:
  cpu_set_t saved_;
};

double run_omp2(size_t n, int sweeps, double* sum) {
  AllCores cores;  // before the first parallel region: its threads inherit the mask
  std::vector<double> va(n * n), vb(n * n);
  double* result = nullptr;
  double sec = 0;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    Rows rows(n, t, omp_get_num_threads());
    double *a = va.data(), *b = vb.data();
    init_rows(a, b, n, rows.lo, rows.hi);  // first touch: each thread's rows in its memory
#pragma omp barrier
    auto t0 = clk::now();
    for (int s = 0; s < sweeps; ++s) {
      sweep_rows(a, b, n, rows.sweep_lo, rows.sweep_hi);
      std::swap(a, b);
#pragma omp barrier
    }
    if (t == 0) {
      sec = seconds_since(t0);
      result = a;
    }
  }
  *sum = checksum(result, n);
  return sec;
}

// Rank 0's counters over the timed sweeps, per sweep (fractions: a trap every few sweeps shows).
struct PerSweep {
  double faults = 0, twins = 0, revalidations = 0, read_misses = 0, downgrades_asked = 0, protect_calls = 0, protect_pages = 0;
};

struct DsmRun {
  double sec = 0, sum = 0;
  PerSweep per_sweep;
};

PerSweep per_sweep(const coherence::Stats& a, const coherence::Stats& b, int sweeps) {
  auto d = [&](uint64_t x, uint64_t y) { return static_cast<double>(y - x) / sweeps; };
  PerSweep s;
  s.faults = d(a.faults, b.faults);
  s.twins = d(a.twins, b.twins);
  s.revalidations = d(a.revalidations, b.revalidations);
  s.read_misses = d(a.read_misses, b.read_misses);
  s.downgrades_asked = d(a.downgrades_asked, b.downgrades_asked);
  s.protect_calls = d(a.protect_calls, b.protect_calls);
  s.protect_pages = d(a.protect_pages, b.protect_pages);
  return s;
}

// The program as a user writes it: nothing but the region, the arrays and barrier().
DsmRun run_dsm(Runtime& rt, const Policy& policy, size_t n, int sweeps) {
  coherence::Config cfg = coherence::Config::from_env();
  cfg.policy = policy;
  cfg.reserve = size_t{4} << 30;
  Space space(rt, cfg);
  auto& region = space.create_region(2 * n * n * sizeof(double) + (size_t{1} << 20), 4096, 0);
  double* a = region.new_array<double>(n * n);
  double* b = region.new_array<double>(n * n);
  Rows rows(n, rt.rank(), rt.size());
  init_rows(a, b, n, rows.lo, rows.hi);
  space.barrier();
  const coherence::Stats before = space.stats();
  auto t0 = clk::now();
  for (int s = 0; s < sweeps; ++s) {
    sweep_rows(a, b, n, rows.sweep_lo, rows.sweep_hi);
    space.barrier();
    std::swap(a, b);
  }
  DsmRun r;
  r.sec = seconds_since(t0);
  r.per_sweep = per_sweep(before, space.stats(), sweeps);
  if (rt.rank() == 0) r.sum = checksum(a, n);  // reads every row: outside the timed part
  space.barrier();
  space.destroy_region(region);
  return r;
}

struct Figures {
  std::vector<double> plain, omp2;
  std::vector<std::vector<double>> dsm = std::vector<std::vector<double>>(kNumPolicies);
  std::vector<PerSweep> stats = std::vector<PerSweep>(kNumPolicies);
};

Figures measure(Runtime& rt, size_t n, const JacobiOptions& opt) {
  Figures f;
  const bool leader = rt.rank() == 0;
  double want = 0;
  // Variants 0-3: the policies; 4: plain; 5: omp2 (rank 0 alone; the others wait in a barrier).
  for (int rep = 0; rep < opt.reps; ++rep)
    run_round(kNumPolicies + 2, rep, [&](int k) {
      double sum = 0;
      if (k >= kNumPolicies) {
        if (leader) (k == kNumPolicies ? f.plain : f.omp2).push_back(k == kNumPolicies ? run_plain(n, opt.sweeps, &sum) : run_omp2(n, opt.sweeps, &sum));
        if (leader && want == 0) want = sum;
        if (leader && sum != want) { std::fprintf(stderr, "jacobi: %s result differs from the plain loop's\n", k == kNumPolicies ? "plain" : "omp2"); std::exit(1); }
        rt.barrier();
        return;
      }
      DsmRun r = run_dsm(rt, Policy::parse(kPolicies[k]), n, opt.sweeps);
      f.dsm[static_cast<size_t>(k)].push_back(r.sec);
      f.stats[static_cast<size_t>(k)] = r.per_sweep;
      if (leader && want == 0) run_plain(n, opt.sweeps, &want);
      if (leader && r.sum != want) {
        std::fprintf(stderr, "jacobi: %s at N=%zu: result differs from the plain loop's\n", kPolicies[k], n);
        std::exit(1);
      }
    });
  return f;
}

void report(Runtime& rt, size_t n, const Figures& f, std::vector<Row>& rows) {
  const double plain = median(f.plain), omp2 = median(f.omp2);
  const int np = rt.size();
  const std::string prefix = "jacobi-np" + std::to_string(np) + "/";
  std::printf("\njacobi N=%zu, %d processes, write tracking %s (seconds for the sweeps; ratios to the plain loop and to 2 OpenMP threads)\n", n, np,
              loom::coherence::Stats{}.write_tracking);
  std::printf("%-24s %9s %8s %8s %9s %9s %9s %9s %9s %9s\n", "variant", "s", "/plain", "/omp2", "faults", "twins", "revalid", "misses",
              "downgr", "mprotect");
  std::printf("%-24s %9.4f %8.2f %8.2f\n", "jacobi/plain", plain, 1.0, plain / omp2);
  std::printf("%-24s %9.4f %8.2f %8.2f\n", "jacobi/omp2", omp2, omp2 / plain, 1.0);
  rows.push_back({"jacobi/plain", n, "s", plain, "s"});
  rows.push_back({"jacobi/omp2", n, "s", omp2, "s"});
  const double dflt = median(f.dsm[0]);
  for (int k = 0; k < kNumPolicies; ++k) {
    const double s = median(f.dsm[static_cast<size_t>(k)]);
    const auto& st = f.stats[static_cast<size_t>(k)];
    const std::string v = prefix + kPolicies[k] + wire_suffix(np);
    std::printf("%-24s %9.4f %8.2f %8.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", v.c_str(), s, s / plain, s / omp2, st.faults, st.twins,
                st.revalidations, st.read_misses, st.downgrades_asked, st.protect_calls);
    rows.push_back({v, n, "s", s, "s"});
    rows.push_back({v, n, "faults", st.faults, "per sweep"});
    rows.push_back({v, n, "twins", st.twins, "per sweep"});
    rows.push_back({v, n, "revalidations", st.revalidations, "per sweep"});
    rows.push_back({v, n, "misses", st.read_misses, "per sweep"});
    rows.push_back({v, n, "protect_calls", st.protect_calls, "per sweep"});
    rows.push_back({v, n, "protect_pages", st.protect_pages, "per sweep"});
    if (k > 0 && np == 2) std::printf("  %s within 1.25x of the default: %.2fx %s\n", kPolicies[k], s / dflt, s / dflt <= 1.25 ? "met" : "MISSED");
  }
  if (np == 1) std::printf("  target np 1 within 1.1x of plain: default %.2fx %s\n", dflt / plain, dflt / plain <= 1.1 ? "met" : "MISSED");
  if (np == 2 && n >= 2048) {
    std::printf("  target np 2, N=%zu: <= 0.85x plain: %.2fx %s; <= 1.5x omp2: %.2fx %s\n", n, dflt / plain,
                dflt / plain <= 0.85 ? "met" : "MISSED", dflt / omp2, dflt / omp2 <= 1.5 ? "met" : "MISSED");
  } else if (np == 2) {
    std::printf("  target np 2, N=%zu: <= 3x plain: %.2fx %s\n", n, dflt / plain, dflt / plain <= 3 ? "met" : "MISSED");
  }
}

}  // namespace

std::vector<Row> jacobi_benchmark(Runtime& rt, const JacobiOptions& opt) {
  std::vector<Row> rows;
  for (int size : opt.sizes) {
    const size_t n = static_cast<size_t>(size);
    Figures f = measure(rt, n, opt);
    if (rt.rank() == 0) report(rt, n, f, rows);
  }
  if (rt.rank() == 0) std::printf("load average: %.2f\n", load_average());
  return rows;
}

}  // namespace loom::bench
