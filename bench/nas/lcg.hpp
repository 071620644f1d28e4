#pragma once
// NPB's random number generator: x_{k+1} = a * x_k mod 2^46, r_k = x_k * 2^-46, a = 5^13.
// Done in 64-bit integer arithmetic: unsigned multiplication wraps modulo 2^64 and 2^46 divides
// 2^64, so (a * x) & (2^46 - 1) is the exact product modulo 2^46 — the same doubles as NPB's
// double-precision randlc/vranlc, which compute that product exactly.
#include <cstdint>

namespace loom::nas {

class Lcg {
 public:
  static constexpr uint64_t kA = 1220703125;  // 5^13
  static constexpr uint64_t kMask = (uint64_t{1} << 46) - 1;
  static constexpr double kScale = 1.0 / static_cast<double>(uint64_t{1} << 46);

  explicit Lcg(uint64_t seed, uint64_t a = kA) : x_(seed & kMask), a_(a & kMask) {}

  // The next uniform in (0, 1): randlc.
  double next() {
    x_ = (a_ * x_) & kMask;
    return static_cast<double>(x_) * kScale;
  }
  // n uniforms: vranlc.
  void fill(double* out, long n) {
    uint64_t x = x_;
    const uint64_t a = a_;
    for (long i = 0; i < n; ++i) {
      x = (a * x) & kMask;
      out[i] = static_cast<double>(x) * kScale;
    }
    x_ = x;
  }
  // Moves on n steps at once (x *= a^n).
  void skip(uint64_t n) { x_ = (pow(a_, n) * x_) & kMask; }
  uint64_t state() const { return x_; }

  // a^n mod 2^46 by squaring.
  static uint64_t pow(uint64_t a, uint64_t n) {
    uint64_t r = 1;
    a &= kMask;
    while (n > 0) {
      if (n & 1) r = (r * a) & kMask;
      a = (a * a) & kMask;
      n >>= 1;
    }
    return r;
  }

 private:
  uint64_t x_;
  uint64_t a_;
};

}  // namespace loom::nas
