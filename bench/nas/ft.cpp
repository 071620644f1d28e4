// FT: NPB's spectral solver of the heat equation by 3-D FFTs; verified by a checksum of 1024
// points after each of niter steps (1e-12 each). The fields are shared arrays of complex values
// (x fastest): members transform x and y in the z planes they own, and z along the y rows they
// own, which is where the data moves between members; the per-point steps (twiddle, evolve)
// follow the rows.
#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <vector>

#include "bench/nas/fft.hpp"
#include "bench/nas/kernel.hpp"
#include "bench/nas/lcg.hpp"

namespace loom::nas {
namespace {

struct FtClass {
  char cls;
  size_t nx, ny, nz;
  int niter;
  double ref[20][2];
};

constexpr FtClass kClasses[] = {
    {'S', 64, 64, 64, 6, {{5.546087004964e+02, 4.845363331978e+02}, {5.546385409189e+02, 4.865304269511e+02}, {5.546148406171e+02, 4.883910722336e+02},
                          {5.545423607415e+02, 4.901273169046e+02}, {5.544255039624e+02, 4.917475857993e+02}, {5.542683411902e+02, 4.932597244941e+02}}},
    {'W', 128, 128, 32, 6, {{5.673612178944e+02, 5.293246849175e+02}, {5.631436885271e+02, 5.282149986629e+02}, {5.594024089970e+02, 5.270996558037e+02},
                            {5.560698047020e+02, 5.260027904925e+02}, {5.530898991250e+02, 5.249400845633e+02}, {5.504159734538e+02, 5.239212247086e+02}}},
    {'A', 256, 256, 128, 6, {{5.046735008193e+02, 5.114047905510e+02}, {5.059412319734e+02, 5.098809666433e+02}, {5.069376896287e+02, 5.098144042213e+02},
                             {5.077892868474e+02, 5.101336130759e+02}, {5.085233095391e+02, 5.104914655194e+02}, {5.091487099959e+02, 5.107917842803e+02}}},
    {'B', 512, 256, 256, 20, {{5.177643571579e+02, 5.077803458597e+02}, {5.154521291263e+02, 5.088249431599e+02}, {5.146409228649e+02, 5.096208912659e+02},
                              {5.142378756213e+02, 5.101023387619e+02}, {5.139626667737e+02, 5.103976610617e+02}, {5.137423460082e+02, 5.105948019802e+02},
                              {5.135547056878e+02, 5.107404165783e+02}, {5.133910925466e+02, 5.108576573661e+02}, {5.132470705390e+02, 5.109577278523e+02},
                              {5.131197729984e+02, 5.110460304483e+02}, {5.130070319283e+02, 5.111252433800e+02}, {5.129070537032e+02, 5.111968077718e+02},
                              {5.128182883502e+02, 5.112616233064e+02}, {5.127393733383e+02, 5.113203605551e+02}, {5.126691062020e+02, 5.113735928093e+02},
                              {5.126064276004e+02, 5.114218460548e+02}, {5.125504076570e+02, 5.114656139760e+02}, {5.125002331720e+02, 5.115053595966e+02},
                              {5.124551951846e+02, 5.115415130407e+02}, {5.124146770029e+02, 5.115744692211e+02}}},
};

const FtClass& ft_class(char cls) {
  for (const FtClass& c : kClasses)
    if (c.cls == cls) return c;
  throw std::invalid_argument(std::string("FT: no class ") + cls);
}

constexpr size_t kBatch = kFftBatch;
constexpr double kAlpha = 1e-6;
constexpr uint64_t kSeed = 314159265;

// The fields: u0 (the spectrum, evolved in place), w (the field in transit) and the twiddle
// factors are stored by y row: element (i, j, k) at i + nx (k + nz j), so a row owner's part is
// one contiguous slab; u1 (the result) is stored by plane, (i, j, k) at i + nx (j + ny k), so a
// plane owner's part is contiguous. Only w moves between members: plane owners write the
// initial field into it and row owners read it (once, in the setup); then in every step row
// owners write it and plane owners read it. u0 and the twiddle factors stay with their row
// owners, u1 with its plane owners.
class Solver {
 public:
  Solver(Team& team, const FtClass& c)
      : team_(team), c_(c), planes_(team.part(c.nz)), rows_(team.part(c.ny)), wx_(fft_roots(c.nx)), wy_(fft_roots(c.ny)), wz_(fft_roots(c.nz)) {
    if (c.ny % kBatch != 0 || c.nz % kBatch != 0) throw std::invalid_argument("FT: ny and nz must be multiples of 16");
    // Each array in the pieces its members access: whole y rows (u0, twiddle; w written), whole
    // planes (u1), and a member's planes of a row (w read) when the planes divide evenly.
    const size_t cells = c.nx * c.ny * c.nz, row = c.nx * c.nz;
    const bool even = c.nz % static_cast<size_t>(team.size()) == 0;
    u0_ = team.shared<Complex>(cells, row * sizeof(Complex));
    w_ = team.shared<Complex>(cells, even ? c.nx * (c.nz / static_cast<size_t>(team.size())) * sizeof(Complex) : c.nx * sizeof(Complex));
    u1_ = team.shared<Complex>(cells, c.nx * c.ny * sizeof(Complex));
    twiddle_ = team.shared<double>(cells, row * sizeof(double));
    const size_t longest = std::max({c.nx, c.ny, c.nz});
    scratch_.resize(2 * longest * kBatch);
    in_.resize(longest);
    ours_.resize(c.ny);
    out_.resize(longest);
  }

  // NPB's init_ui: every array written once, each part by its member (its first touch), w's
  // rows too (w stands for the reference's scratch arrays, which its untimed run touches).
  void touch() {
    for (size_t j = rows_.lo; j < rows_.hi; ++j) {
      std::fill_n(team_.overwriting(u0_ + slab(j), c_.nx * c_.nz), c_.nx * c_.nz, Complex{});
      std::fill_n(team_.overwriting(w_ + slab(j), c_.nx * c_.nz), c_.nx * c_.nz, Complex{});
      std::fill_n(team_.overwriting(twiddle_ + slab(j), c_.nx * c_.nz), c_.nx * c_.nz, 0.0);
    }
    for (size_t k = planes_.lo; k < planes_.hi; ++k) std::fill_n(team_.overwriting(u1_ + plane(k), c_.nx * c_.ny), c_.nx * c_.ny, Complex{});
    team_.barrier();
  }

  // compute_indexmap, compute_initial_conditions and the forward transform into u0.
  void setup() {
    twiddle();
    // Our planes of w, written in bulk: in each y row they are one contiguous range.
    std::vector<Complex*> ours(c_.ny);
    for (size_t j = 0; j < c_.ny; ++j) ours[j] = team_.overwriting(w_ + slab(j) + c_.nx * planes_.lo, c_.nx * planes_.size());
    for (size_t k = planes_.lo; k < planes_.hi; ++k) {
      Lcg g(kSeed);
      g.skip(2 * c_.nx * c_.ny * k);
      for (size_t j = 0; j < c_.ny; ++j) {
        out_[j] = ours[j] + c_.nx * (k - planes_.lo);
        g.fill(reinterpret_cast<double*>(out_[j]), static_cast<long>(2 * c_.nx));
      }
      along_x(+1, c_.ny);
      for (size_t j = 0; j < c_.ny; ++j) in_[j] = out_[j];
      along_y(+1);
    }
    team_.barrier();
    for (size_t j = rows_.lo; j < rows_.hi; ++j) {
      const Complex* in = team_.reading(w_ + slab(j), c_.nx * c_.nz);
      Complex* out = team_.overwriting(u0_ + slab(j), c_.nx * c_.nz);
      for (size_t k = 0; k < c_.nz; ++k) {
        in_[k] = in + c_.nx * k;
        out_[k] = out + c_.nx * k;
      }
      along_z(+1, nullptr);
    }
  }

  // One step: evolve u0, its inverse transform into u1 (z and x by row into w, y by plane from
  // w into u1), the checksum of u1.
  Complex step() {
    for (size_t j = rows_.lo; j < rows_.hi; ++j) {
      Complex* a = team_.writing(u0_ + slab(j), c_.nx * c_.nz);
      Complex* o = team_.overwriting(w_ + slab(j), c_.nx * c_.nz);  // z's output, then x in place
      for (size_t k = 0; k < c_.nz; ++k) {
        in_[k] = a + c_.nx * k;
        out_[k] = o + c_.nx * k;
      }
      along_z(-1, twiddle_ + slab(j));
      along_x(-1, c_.nz);
    }
    team_.barrier();
    // Our planes of w, read in bulk: in each y row they are one contiguous range.
    for (size_t j = 0; j < c_.ny; ++j) ours_[j] = team_.reading(w_ + slab(j) + c_.nx * planes_.lo, c_.nx * planes_.size());
    for (size_t k = planes_.lo; k < planes_.hi; ++k) {
      Complex* to = team_.overwriting(u1_ + plane(k), c_.nx * c_.ny);
      for (size_t j = 0; j < c_.ny; ++j) {
        in_[j] = ours_[j] + c_.nx * (k - planes_.lo);
        out_[j] = to + c_.nx * j;
      }
      along_y(-1);
    }
    return checksum();
  }

 private:
  size_t plane(size_t k) const { return c_.nx * c_.ny * k; }  // u1's plane k
  size_t slab(size_t j) const { return c_.nx * c_.nz * j; }   // row j of u0, w, twiddle

  void twiddle() {
    const double ap = -4.0 * kAlpha * M_PI * M_PI;
    auto wave = [](size_t i, size_t n) { return static_cast<long>((i + n / 2) % n) - static_cast<long>(n / 2); };
    for (size_t j = rows_.lo; j < rows_.hi; ++j) {
      double* t = team_.writing(twiddle_ + slab(j), c_.nx * c_.nz);
      for (size_t k = 0; k < c_.nz; ++k) {
        const long kk = wave(k, c_.nz), jj = wave(j, c_.ny);
        for (size_t i = 0; i < c_.nx; ++i) {
          const long ii = wave(i, c_.nx);
          t[c_.nx * k + i] = std::exp(ap * static_cast<double>(ii * ii + jj * jj + kk * kk));
        }
      }
    }
  }

  // Along x in the rows out_[0..count), in place, 16 rows at a time.
  void along_x(int sign, size_t count) {
    Complex *y = scratch_.data(), *w = y + c_.nx * kBatch;
    for (size_t r0 = 0; r0 < count; r0 += kBatch) {
      for (size_t b = 0; b < kBatch; ++b)
        for (size_t i = 0; i < c_.nx; ++i) y[i * kBatch + b] = out_[r0 + b][i];
      fft_batch(sign, c_.nx, wx_, y, w);
      for (size_t b = 0; b < kBatch; ++b)
        for (size_t i = 0; i < c_.nx; ++i) out_[r0 + b][i] = y[i * kBatch + b];
    }
  }

  // Along y from the rows in_[j] of one plane into the rows out_[j] (which may be the same),
  // 16 columns at a time.
  void along_y(int sign) {
    Complex *y = scratch_.data(), *w = y + c_.ny * kBatch;
    for (size_t i0 = 0; i0 < c_.nx; i0 += kBatch) {
      for (size_t j = 0; j < c_.ny; ++j) std::copy(in_[j] + i0, in_[j] + i0 + kBatch, y + j * kBatch);
      fft_batch(sign, c_.ny, wy_, y, w);
      for (size_t j = 0; j < c_.ny; ++j) std::copy(y + j * kBatch, y + (j + 1) * kBatch, out_[j] + i0);
    }
  }

  // Along z from the rows in_[k] into out_[k], 16 columns at a time. With the twiddle factors
  // of the row (k at twiddle + nx k): NPB's evolve first, in_ *= twiddle in place.
  void along_z(int sign, const double* twiddle) {
    Complex *y = scratch_.data(), *w = y + c_.nz * kBatch;
    for (size_t i0 = 0; i0 < c_.nx; i0 += kBatch) {
      for (size_t k = 0; k < c_.nz; ++k) {
        if (twiddle != nullptr) {
          Complex* a = const_cast<Complex*>(in_[k]) + i0;  // u0's own slab, declared written
          const double* t = twiddle + c_.nx * k + i0;
          for (size_t b = 0; b < kBatch; ++b) a[b] *= t[b];
        }
        std::copy(in_[k] + i0, in_[k] + i0 + kBatch, y + k * kBatch);
      }
      fft_batch(sign, c_.nz, wz_, y, w);
      for (size_t k = 0; k < c_.nz; ++k) std::copy(y + k * kBatch, y + (k + 1) * kBatch, out_[k] + i0);
    }
  }

  Complex checksum() {
    double s[2] = {0, 0};
    for (size_t q = 1; q <= 1024; ++q) {
      const size_t k = (5 * q) % c_.nz;
      if (k < planes_.lo || k >= planes_.hi) continue;
      const Complex v = u1_[plane(k) + c_.nx * ((3 * q) % c_.ny) + q % c_.nx];
      s[0] += v.real();
      s[1] += v.imag();
    }
    team_.sum(s, 2);
    const double n = static_cast<double>(c_.nx * c_.ny * c_.nz);
    return {s[0] / n, s[1] / n};
  }

  Team& team_;
  const FtClass& c_;
  const Range planes_, rows_;  // owned z planes; owned y rows
  const std::vector<Complex> wx_, wy_, wz_;
  Complex *u0_ = nullptr, *w_ = nullptr, *u1_ = nullptr;
  double* twiddle_ = nullptr;
  std::vector<Complex> scratch_;
  std::vector<const Complex*> ours_;  // our planes of w in each y row, read in bulk
  std::vector<const Complex*> in_;    // the rows a pass reads
  std::vector<Complex*> out_;       // the rows a pass writes
};

}  // namespace

size_t ft_shared_bytes(char cls, int) {
  const FtClass& c = ft_class(cls);
  const size_t cells = c.nx * c.ny * c.nz;
  return cells * (3 * sizeof(Complex) + sizeof(double)) + 4 * 4096;
}

Result run_ft(Team& team, char cls) {
  const FtClass& c = ft_class(cls);
  Solver ft(team, c);
  // Untimed, as the reference: every array written once (init_ui), then the whole setup
  // ("to make sure all data is touched").
  ft.touch();
  ft.setup();
  Result r;
  r.verified = true;
  TeamTimer timer(team);
  ft.setup();
  std::vector<Complex> sums;
  for (int t = 1; t <= c.niter; ++t) sums.push_back(ft.step());
  r.seconds = timer.stop();
  for (int t = 0; t < c.niter; ++t) {
    const Complex ref(c.ref[t][0], c.ref[t][1]);
    const double err = std::abs(sums[static_cast<size_t>(t)] - ref) / std::abs(ref);
    const bool ok = err <= 1e-12;
    char line[160];
    std::snprintf(line, sizeof line, "T=%-3d checksum %20.12e %20.12e  error %9.3e  %s", t + 1, sums[static_cast<size_t>(t)].real(),
                  sums[static_cast<size_t>(t)].imag(), err, ok ? "ok" : "FAILED");
    r.details.emplace_back(line);
    r.verified = r.verified && ok;
  }
  const double n = static_cast<double>(c.nx * c.ny * c.nz);
  r.kernel = "FT";
  r.cls = cls;
  r.size = std::to_string(c.nx) + "x" + std::to_string(c.ny) + "x" + std::to_string(c.nz);
  r.iterations = c.niter;
  r.operation = "floating point";
  r.mops = 1e-6 * n * (14.8157 + 7.19641 * std::log(n) + (5.23518 + 7.21113 * std::log(n)) * c.niter) / r.seconds;
  return r;
}

}  // namespace loom::nas
