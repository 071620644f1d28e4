// BT's right-hand side: the forcing term of the exact solution (once), and each step's fluxes
// and dissipation of u in the three directions (NPB's exact_rhs and compute_rhs), in NPB's
// expressions and order of operations.
#include <cstddef>

#include "bench/nas/bt.hpp"

namespace loom::nas::bt {
namespace {

// The bracket of NPB's fourth-order dissipation at position p of n along a line, from the values
// at p-2..p+2 (at(d) is the value at p + d; the ends use only those inside).
template <typename At>
double dissipation(size_t p, size_t n, At at) {
  if (p == 1) return 5.0 * at(0) - 4.0 * at(1) + at(2);
  if (p == 2) return -4.0 * at(-1) + 6.0 * at(0) - 4.0 * at(1) + at(2);
  if (p == n - 3) return at(-2) - 4.0 * at(-1) + 6.0 * at(0) - 4.0 * at(1);
  if (p == n - 2) return at(-2) - 4. * at(-1) + 5. * at(0);
  return at(-2) - 4.0 * at(-1) + 6.0 * at(0) - 4.0 * at(1) + at(2);
}

// The exact solution along a line through one point of plane k and the quantities its forcing
// term uses (NPB's ue, buf, cuf, q), at offsets -2..+2 from the point along axis a.
struct ExactWindow {
  double ue[5][5], buf[5][5], cuf[5], q[5];  // [component][offset + 2]

  ExactWindow(const Constants& k, int a, size_t i, size_t j, size_t kk, size_t n) {
    const size_t at[3] = {i, j, kk};
    const int c = a + 1;  // the momentum along the axis
    for (int d = -2; d <= 2; ++d) {
      const long p = static_cast<long>(at[a]) + d;
      if (p < 0 || p >= static_cast<long>(n)) continue;
      double x[3] = {static_cast<double>(i) * k.dnm1[0], static_cast<double>(j) * k.dnm1[1], static_cast<double>(kk) * k.dnm1[2]};
      x[a] = static_cast<double>(p) * k.dnm1[a];
      double t[5];
      exact_solution(x[0], x[1], x[2], t);
      const int o = d + 2;
      for (int m = 0; m < 5; ++m) ue[m][o] = t[m];
      const double dtpp = 1.0 / t[0];
      for (int m = 1; m < 5; ++m) buf[m][o] = dtpp * t[m];
      cuf[o] = buf[c][o] * buf[c][o];
      const int o1 = c == 1 ? 2 : 1, o2 = c == 3 ? 2 : 3;  // the other two momenta, in NPB's order
      buf[0][o] = cuf[o] + buf[o1][o] * buf[o1][o] + buf[o2][o] * buf[o2][o];
      q[o] = 0.5 * (buf[1][o] * ue[1][o] + buf[2][o] * ue[2][o] + buf[3][o] * ue[3][o]);
    }
  }
};

// One direction's fluxes and dissipation at a point of an own plane. The point's neighbours
// along x and y are in its plane, along z in the planes around it (the plane views).
struct Flux {
  const Constants& k;
  const Fields& f;
  const PlaneViews& pv;
  int a;

  // The point (kk, j, i) moved d along the axis, in a 5-component or a scalar array's planes.
  const double* vec(const std::vector<const double*>& planes, size_t kk, size_t j, size_t i, int d) const {
    if (a == 2) return planes[kk + static_cast<size_t>(d)] + j * f.row + 5 * i;
    return planes[kk] + (a == 1 ? j + static_cast<size_t>(d) : j) * f.row + 5 * (a == 0 ? i + static_cast<size_t>(d) : i);
  }
  double sc(const std::vector<const double*>& planes, size_t kk, size_t j, size_t i, int d) const {
    if (a == 2) return planes[kk + static_cast<size_t>(d)][j * f.n + i];
    return planes[kk][(a == 1 ? j + static_cast<size_t>(d) : j) * f.n + (a == 0 ? i + static_cast<size_t>(d) : i)];
  }

  void add(double* r, size_t kk, size_t j, size_t i) const {
    const int c = a + 1;
    const double t2 = k.t2[a], *con = k.con[a], *dt1 = k.dt1[a], c1 = k.c1, c2 = k.c2;
    const double *u = vec(pv.u, kk, j, i, 0), *up = vec(pv.u, kk, j, i, 1), *um = vec(pv.u, kk, j, i, -1);
    const std::vector<const double*>* vel[3] = {&pv.us, &pv.vs, &pv.ws};
    const double wijk = sc(*vel[a], kk, j, i, 0), wp1 = sc(*vel[a], kk, j, i, 1), wm1 = sc(*vel[a], kk, j, i, -1);
    const double sqp = sc(pv.square, kk, j, i, 1), sqm = sc(pv.square, kk, j, i, -1);
    auto second = [&](const std::vector<const double*>& s) { return sc(s, kk, j, i, 1) - 2.0 * sc(s, kk, j, i, 0) + sc(s, kk, j, i, -1); };
    r[0] = r[0] + dt1[0] * (up[0] - 2.0 * u[0] + um[0]) - t2 * (up[c] - um[c]);
    for (int m = 1; m < 4; ++m) {
      if (m == c)
        r[m] = r[m] + dt1[m] * (up[m] - 2.0 * u[m] + um[m]) + con[1] * k.con43 * (wp1 - 2.0 * wijk + wm1) -
               t2 * (up[m] * wp1 - um[m] * wm1 + (up[4] - sqp - um[4] + sqm) * c2);
      else
        r[m] = r[m] + dt1[m] * (up[m] - 2.0 * u[m] + um[m]) + con[1] * second(*vel[m - 1]) - t2 * (up[m] * wp1 - um[m] * wm1);
    }
    r[4] = r[4] + dt1[4] * (up[4] - 2.0 * u[4] + um[4]) + con[2] * second(pv.qs) + con[3] * (wp1 * wp1 - 2.0 * wijk * wijk + wm1 * wm1) +
           con[4] * (up[4] * sc(pv.rho_i, kk, j, i, 1) - 2.0 * u[4] * sc(pv.rho_i, kk, j, i, 0) + um[4] * sc(pv.rho_i, kk, j, i, -1)) -
           t2 * ((c1 * up[4] - c2 * sqp) * wp1 - (c1 * um[4] - c2 * sqm) * wm1);
  }

  void dissipate(double* r, size_t kk, size_t j, size_t i) const {
    const size_t pos[3] = {i, j, kk};
    for (int m = 0; m < 5; ++m)
      r[m] = r[m] - k.dssp * dissipation(pos[a], f.n, [&](int d) { return vec(pv.u, kk, j, i, d)[m]; });
  }
};

}  // namespace

// The forcing term of plane k: each direction's flux differences of the exact solution and
// their dissipation, in NPB's order (x, y, z), negated.
void Grid::exact_forcing_plane(size_t k) {
  const size_t n = f_.n;
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < n; ++i)
      for (int m = 0; m < 5; ++m) f_.forcing[f_.v(k, j, i) + m] = 0.0;
  if (k == 0 || k == n - 1) return;
  const double c1 = k_.c1, c2 = k_.c2;
  for (int a = 0; a < 3; ++a) {
    const int c = a + 1;
    const double t2 = k_.t2[a], *con = k_.con[a], *dt1 = k_.dt1[a];
    for (size_t j = 1; j < n - 1; ++j)
      for (size_t i = 1; i < n - 1; ++i) {
        const ExactWindow w(k_, a, i, j, k, n);
        double* f = f_.forcing + f_.v(k, j, i);
        const int P = 3, M = 1, O = 2;  // offsets +1, -1, 0 in the window
        auto second = [&](const double* x) { return x[P] - 2.0 * x[O] + x[M]; };
        f[0] = f[0] - t2 * (w.ue[c][P] - w.ue[c][M]) + dt1[0] * second(w.ue[0]);
        for (int m = 1; m < 4; ++m) {
          if (m == c)
            f[m] = f[m] - t2 * ((w.ue[m][P] * w.buf[c][P] + c2 * (w.ue[4][P] - w.q[P])) - (w.ue[m][M] * w.buf[c][M] + c2 * (w.ue[4][M] - w.q[M]))) +
                   con[0] * second(w.buf[m]) + dt1[m] * second(w.ue[m]);
          else
            f[m] = f[m] - t2 * (w.ue[m][P] * w.buf[c][P] - w.ue[m][M] * w.buf[c][M]) + con[1] * second(w.buf[m]) + dt1[m] * second(w.ue[m]);
        }
        f[4] = f[4] - t2 * (w.buf[c][P] * (c1 * w.ue[4][P] - c2 * w.q[P]) - w.buf[c][M] * (c1 * w.ue[4][M] - c2 * w.q[M])) +
               0.5 * con[2] * second(w.buf[0]) + con[3] * second(w.cuf) + con[4] * second(w.buf[4]) + dt1[4] * second(w.ue[4]);
        const size_t pos[3] = {i, j, k};
        for (int m = 0; m < 5; ++m) f[m] = f[m] - k_.dssp * dissipation(pos[a], n, [&](int d) { return w.ue[m][d + 2]; });
      }
  }
  for (size_t j = 1; j < n - 1; ++j)
    for (size_t i = 1; i < n - 1; ++i)
      for (int m = 0; m < 5; ++m) f_.forcing[f_.v(k, j, i) + m] = -1.0 * f_.forcing[f_.v(k, j, i) + m];
}

void Grid::exact_rhs() {
  for (size_t k = k0_; k < k1_; ++k) exact_forcing_plane(k);
  team_.barrier();
}

// The right-hand side: the reciprocal density, velocities, kinetic energy and forcing of the
// own planes; after a barrier (the fluxes read the neighbouring planes), the three directions'
// fluxes and dissipation on the own interior planes, times dt.
void Grid::compute_rhs() {
  const size_t n = f_.n;
  // Only this member writes its planes of these, whole here: no fetch, no twin.
  if (k1_ > k0_) {
    team_.overwriting(f_.rhs + f_.v(k0_, 0, 0), (k1_ - k0_) * f_.plane);
    for (double* a : {f_.rho_i, f_.us, f_.vs, f_.ws, f_.qs, f_.square}) team_.overwriting(a + f_.s(k0_, 0, 0), (k1_ - k0_) * f_.splane);
  }
  for (size_t k = k0_; k < k1_; ++k)
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < n; ++i) {
        const double* u = f_.u + f_.v(k, j, i);
        const size_t s = f_.s(k, j, i);
        const double rho_inv = 1.0 / u[0];
        f_.rho_i[s] = rho_inv;
        f_.us[s] = u[1] * rho_inv;
        f_.vs[s] = u[2] * rho_inv;
        f_.ws[s] = u[3] * rho_inv;
        f_.square[s] = 0.5 * (u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) * rho_inv;
        f_.qs[s] = f_.square[s] * rho_inv;
        for (int m = 0; m < 5; ++m) f_.rhs[f_.v(k, j, i) + m] = f_.forcing[f_.v(k, j, i) + m];
      }
  team_.barrier();
  if (ki1_ <= ki0_) return;
  name_flux_planes();
  team_.overwriting(f_.rhs + f_.v(ki0_, 0, 0), (ki1_ - ki0_) * f_.plane);  // the fluxes and the x and y solves rewrite it
  const Flux dir[3] = {{k_, f_, views_, 0}, {k_, f_, views_, 1}, {k_, f_, views_, 2}};
  for (size_t k = ki0_; k < ki1_; ++k) {
    for (const Flux& fl : dir) {
      for (size_t j = 1; j < n - 1; ++j)
        for (size_t i = 1; i < n - 1; ++i) fl.add(f_.rhs + f_.v(k, j, i), k, j, i);
      for (size_t j = 1; j < n - 1; ++j)
        for (size_t i = 1; i < n - 1; ++i) fl.dissipate(f_.rhs + f_.v(k, j, i), k, j, i);
    }
    for (size_t j = 1; j < n - 1; ++j)
      for (size_t i = 1; i < n - 1; ++i)
        for (int m = 0; m < 5; ++m) f_.rhs[f_.v(k, j, i) + m] = f_.rhs[f_.v(k, j, i) + m] * k_.dt;
  }
}

// The planes the fluxes of the own interior planes read: u two planes beyond them, the scalars
// one; the others' through views.
void Grid::name_flux_planes() {
  const size_t n = f_.n;
  for (size_t k = ki0_ - std::min<size_t>(ki0_, 2); k < std::min(n, ki1_ + 2); ++k) views_.u[k] = plane_of(f_.u, f_.plane, k);
  const std::pair<const double*, std::vector<const double*>*> scalars[] = {
      {f_.rho_i, &views_.rho_i}, {f_.us, &views_.us}, {f_.vs, &views_.vs}, {f_.ws, &views_.ws}, {f_.qs, &views_.qs}, {f_.square, &views_.square}};
  for (const auto& [a, v] : scalars)
    for (size_t k = ki0_ - 1; k < std::min(n, ki1_ + 1); ++k) (*v)[k] = plane_of(a, f_.splane, k);
}

}  // namespace loom::nas::bt
