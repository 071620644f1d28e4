#pragma once
// The complex FFT of FT: a radix-2 Stockham transform (natural order in and out) of kFftBatch
// sequences at once, interleaved so the innermost loop runs over the sequences.
#include <complex>
#include <cstddef>
#include <vector>

namespace loom::nas {

using Complex = std::complex<double>;
constexpr size_t kFftBatch = 16;

// The roots a transform of length n (a power of two) uses: exp(+i pi j / h) at [h + j] for
// h = 1, 2, 4, ..., n/2 and j < h.
std::vector<Complex> fft_roots(size_t n);

// kFftBatch sequences of length n, element k of sequence b at x[k * kFftBatch + b], transformed
// in place: X_k = sum_j x_j exp(sign 2 pi i j k / n), unnormalized (sign +1 is NPB's forward).
// y is scratch of the same size; w = fft_roots(n).
void fft_batch(int sign, size_t n, const std::vector<Complex>& w, Complex* x, Complex* y);

}  // namespace loom::nas
