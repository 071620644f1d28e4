// EP: Gaussian pairs by the Marsaglia polar method from NPB's generator, counted in annuli.
// Verified as NPB 3.4.2 and later do (sums of |X| and |Y| and the number of pairs, 1e-8); the
// signed sums of NPB 3.4.1 and earlier are checked as well, against their own references.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "bench/nas/kernel.hpp"
#include "bench/nas/lcg.hpp"

namespace loom::nas {
namespace {

constexpr int kBatchLog2 = 16;  // 2^16 pairs per batch (NPB's mk)
constexpr long kBatch = long{1} << kBatchLog2;
constexpr uint64_t kSeed = 271828183;

struct EpClass {
  char cls;
  int m;  // 2^m pairs
  double abs_x, abs_y, pairs;  // NPB >= 3.4.2
  double sum_x, sum_y;         // NPB <= 3.4.1
};

constexpr EpClass kClasses[] = {
    {'S', 24, 1.051299420395306e+07, 1.051517131857535e+07, 13176389, -3.247834652034740e+3, -6.958407078382297e+3},
    {'W', 25, 2.102505525182392e+07, 2.103162209578822e+07, 26354769, -2.863319731645753e+3, -6.320053679109499e+3},
    {'A', 28, 1.682235632304711e+08, 1.682195123368299e+08, 210832767, -4.295875165629892e+3, -1.580732573678431e+4},
    {'B', 30, 6.728927543423024e+08, 6.728951822504275e+08, 843345606, 4.033815542441498e+4, -2.660669192809235e+4},
};

const EpClass& ep_class(char cls) {
  for (const EpClass& c : kClasses)
    if (c.cls == cls) return c;
  throw std::invalid_argument(std::string("EP: no class ") + cls);
}

// What one member adds up: |X|, |Y|, X, Y and the ten annulus counts.
struct Tally {
  double v[14] = {};
};

void run_batch(uint64_t batch, std::vector<double>& x, Tally& t) {
  const uint64_t an = Lcg::pow(Lcg::kA, 2 * kBatch);  // the stream moves 2 * kBatch per batch
  Lcg g((Lcg::pow(an, batch) * kSeed) & Lcg::kMask);
  g.fill(x.data(), 2 * kBatch);
  double ax = 0, ay = 0, sx = 0, sy = 0;
  for (long i = 0; i < kBatch; ++i) {
    const double x1 = 2.0 * x[static_cast<size_t>(2 * i)] - 1.0;
    const double x2 = 2.0 * x[static_cast<size_t>(2 * i + 1)] - 1.0;
    const double t1 = x1 * x1 + x2 * x2;
    if (t1 > 1.0) continue;
    const double t2 = std::sqrt(-2.0 * std::log(t1) / t1);
    const double t3 = x1 * t2, t4 = x2 * t2;
    const int l = static_cast<int>(std::fmax(std::fabs(t3), std::fabs(t4)));
    if (l < 10) t.v[4 + l] += 1.0;  // |X| < sqrt(-2 ln t1) < 12; NPB counts annuli 0..9
    ax += std::fabs(t3);
    ay += std::fabs(t4);
    sx += t3;
    sy += t4;
  }
  t.v[0] += ax;
  t.v[1] += ay;
  t.v[2] += sx;
  t.v[3] += sy;
}

}  // namespace

size_t ep_shared_bytes(char cls, int) {
  ep_class(cls);  // throws on a bad class
  return 0;
}

Result run_ep(Team& team, char cls) {
  const EpClass& c = ep_class(cls);
  const uint64_t batches = uint64_t{1} << (c.m - kBatchLog2);
  std::vector<double> x(2 * kBatch);
  Tally t;
  TeamTimer timer(team);
  const Range mine = team.part(batches);
  for (size_t b = mine.lo; b < mine.hi; ++b) run_batch(b, x, t);
  team.sum(t.v, 14);
  Result r;
  r.seconds = timer.stop();
  r.kernel = "EP";
  r.cls = cls;
  r.size = std::to_string(uint64_t{2} << c.m);
  r.iterations = 0;
  r.operation = "Random numbers generated";
  r.mops = std::ldexp(1.0, c.m + 1) / r.seconds / 1e6;
  double pairs = 0;
  for (int l = 0; l < 10; ++l) pairs += t.v[4 + l];
  bool ok = check_relative("sum|X|", t.v[0], c.abs_x, 1e-8, r.details);
  ok = check_relative("sum|Y|", t.v[1], c.abs_y, 1e-8, r.details) && ok;
  ok = check_relative("pairs", pairs, c.pairs, 1e-8, r.details) && ok;
  ok = check_relative("sumX(3.4.1)", t.v[2], c.sum_x, 1e-8, r.details) && ok;
  ok = check_relative("sumY(3.4.1)", t.v[3], c.sum_y, 1e-8, r.details) && ok;
  char counts[200];
  std::snprintf(counts, sizeof counts, "counts     %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f", t.v[4], t.v[5], t.v[6], t.v[7], t.v[8], t.v[9],
                t.v[10], t.v[11], t.v[12], t.v[13]);
  r.details.emplace_back(counts);
  r.verified = ok;
  return r;
}

}  // namespace loom::nas
