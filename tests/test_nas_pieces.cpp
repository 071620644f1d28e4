// The NAS kernels' pieces, in one process: NPB's generator, the partition of index ranges, the
// FFT, the command line, and every kernel's OpenMP build at class S (the reference build that
// bench_nas times beside Loom).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <stdexcept>
#include <vector>

#include "bench/nas/args.hpp"
#include "bench/nas/fft.hpp"
#include "bench/nas/lcg.hpp"
#include "bench/nas/omp_team.hpp"
#include "bench/nas/team.hpp"

namespace loom::nas {
namespace {

// The generator against 128-bit arithmetic, and skipping against stepping.
TEST(NasLcg, MatchesExactArithmeticAndSkips) {
  unsigned __int128 x = 314159265;
  Lcg g(314159265);
  for (int i = 0; i < 10000; ++i) {
    x = (x * Lcg::kA) % (static_cast<unsigned __int128>(1) << 46);
    ASSERT_EQ(g.next(), static_cast<double>(static_cast<uint64_t>(x)) * 0x1p-46) << "step " << i;
  }
  Lcg a(271828183), b(271828183);
  for (int i = 0; i < 12345; ++i) a.next();
  b.skip(12345);
  EXPECT_EQ(a.state(), b.state());
  std::vector<double> v(100);
  Lcg c(271828183);
  c.fill(v.data(), 100);
  Lcg d(271828183);
  for (double e : v) EXPECT_EQ(e, d.next());
  EXPECT_EQ(Lcg::pow(Lcg::kA, 0), 1u);
}

TEST(NasPartition, CoversInOrderOnGrainBoundaries) {
  for (size_t n : {0, 1, 7, 1400, 4096, 14000})
    for (int members : {1, 2, 3, 4, 8})
      for (size_t grain : {1, 4, 512}) {
        size_t next = 0;
        for (int m = 0; m < members; ++m) {
          const Range r = partition(n, m, members, grain);
          EXPECT_EQ(r.lo, next);
          EXPECT_LE(r.lo, r.hi);
          if (r.hi != n) {
            EXPECT_EQ(r.hi % grain, 0u);
          }
          EXPECT_LE(r.size(), (n + grain - 1) / grain / static_cast<size_t>(members) * grain + grain);
          next = r.hi;
        }
        EXPECT_EQ(next, n);
      }
  EXPECT_THROW(partition(10, 2, 2), std::invalid_argument);
  EXPECT_THROW(partition(10, 0, 0), std::invalid_argument);
  EXPECT_THROW(partition(10, 0, 1, 0), std::invalid_argument);
}

// Every length 2..256 and both signs against the definition; back and forth gives n x.
TEST(NasFft, MatchesTheDefinition) {
  for (size_t n = 2; n <= 256; n *= 2) {
    const std::vector<Complex> w = fft_roots(n);
    std::vector<Complex> x(n * kFftBatch), y(n * kFftBatch);
    for (size_t i = 0; i < x.size(); ++i) x[i] = Complex(std::sin(0.37 * static_cast<double>(i)), std::cos(1.3 * static_cast<double>(i * i % 17)));
    for (int sign : {+1, -1}) {
      std::vector<Complex> got = x;
      fft_batch(sign, n, w, got.data(), y.data());
      for (size_t b = 0; b < kFftBatch; b += 5)
        for (size_t k = 0; k < n; ++k) {
          Complex want = 0;
          for (size_t j = 0; j < n; ++j) want += x[j * kFftBatch + b] * std::polar(1.0, sign * 2 * M_PI * static_cast<double>(j * k % n) / static_cast<double>(n));
          ASSERT_LT(std::abs(got[k * kFftBatch + b] - want), 1e-9 * static_cast<double>(n)) << "n " << n << " sign " << sign << " k " << k;
        }
      fft_batch(-sign, n, w, got.data(), y.data());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_LT(std::abs(got[i] / static_cast<double>(n) - x[i]), 1e-12);
    }
  }
}

std::vector<char*> argv_of(std::vector<std::string>& s) {
  std::vector<char*> v;
  for (auto& a : s) v.push_back(a.data());
  return v;
}

TEST(NasArgs, ParsesAndRejects) {
  std::vector<std::string> ok = {"nas_omp", "CG", "w", "--threads", "2"};
  auto v = argv_of(ok);
  const RunArgs a = parse_run_args(static_cast<int>(v.size()), v.data(), true);
  EXPECT_STREQ(a.kernel->name, "cg");
  EXPECT_EQ(a.cls, 'W');
  EXPECT_EQ(a.threads, 2);
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"x"}, {"x", "cg"}, {"x", "zz", "S"}, {"x", "cg", "C"}, {"x", "cg", "S", "--threads", "0"}, {"x", "cg", "S", "--threads", "2x"},
           {"x", "cg", "S", "--threads"}, {"x", "cg", "S", "extra"}, {"x", "cg", "S", "--policy", "fixed-ts"}}) {
    auto b = argv_of(bad);
    EXPECT_THROW(parse_run_args(static_cast<int>(b.size()), b.data(), true), std::invalid_argument) << bad.back();
  }
  std::vector<std::string> loom = {"nas_loom", "ft", "S", "--policy", "fixed-ts"};
  auto l = argv_of(loom);
  EXPECT_EQ(parse_run_args(static_cast<int>(l.size()), l.data(), false).policy, "fixed-ts");
}

class OmpBuild : public ::testing::TestWithParam<int> {};

TEST_P(OmpBuild, EveryKernelVerifiesAtClassS) {
  for (const Kernel& k : kernels()) {
    const Result r = run_on_omp(k, 'S', GetParam());
    EXPECT_TRUE(r.verified) << k.name;
  }
  EXPECT_THROW(run_on_omp(kernels().front(), 'Q', 1), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Threads, OmpBuild, ::testing::Values(1, 2));

}  // namespace
}  // namespace loom::nas
