#include "bench/nas/fft.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace loom::nas {

std::vector<Complex> fft_roots(size_t n) {
  std::vector<Complex> w(std::max<size_t>(n, 2));
  for (size_t h = 1; h < n; h *= 2)
    for (size_t j = 0; j < h; ++j) w[h + j] = std::polar(1.0, M_PI * static_cast<double>(j) / static_cast<double>(h));
  return w;
}

// Stage by stage, from src into dst: pairs half a sequence apart (a, b) become a + b and
// w (a - b), with w the root for the stage's span. Complex products written out in doubles.
void fft_batch(int sign, size_t n, const std::vector<Complex>& w, Complex* x, Complex* y) {
  constexpr size_t B = kFftBatch;
  Complex *src = x, *dst = y;
  const size_t half = n / 2;
  for (size_t lk = 1; lk < n; lk *= 2) {
    const size_t li = half / lk;
    for (size_t i = 0; i < li; ++i) {
      const double wr = w[li + i].real(), wi = sign > 0 ? w[li + i].imag() : -w[li + i].imag();
      for (size_t k = 0; k < lk; ++k) {
        const double* a = reinterpret_cast<const double*>(src + (i * lk + k) * B);
        const double* b = reinterpret_cast<const double*>(src + (i * lk + k + half) * B);
        double* c = reinterpret_cast<double*>(dst + (i * 2 * lk + k) * B);
        double* d = reinterpret_cast<double*>(dst + (i * 2 * lk + k + lk) * B);
        for (size_t t = 0; t < B; ++t) {
          const double ar = a[2 * t], ai = a[2 * t + 1], br = b[2 * t], bi = b[2 * t + 1];
          c[2 * t] = ar + br;
          c[2 * t + 1] = ai + bi;
          const double dr = ar - br, di = ai - bi;
          d[2 * t] = wr * dr - wi * di;
          d[2 * t + 1] = wr * di + wi * dr;
        }
      }
    }
    std::swap(src, dst);
  }
  if (src != x) std::copy(src, src + n * B, x);
}

}  // namespace loom::nas
