// BT: NPB's simulated CFD application — the 3-D compressible Navier-Stokes equations on an n^3
// grid, advanced by an ADI scheme whose three factors are 5x5 block tri-diagonal systems along
// x, y and z (bt_solve.hpp) — verified by the RMS norms of the residual and of the error against
// the exact solution, to NPB's reference values (1e-8).
//
// Members own z planes for the right-hand side, the x and y solves and the update, and y rows for
// the z solve, whose lines cross every member's planes: it reads the other members' rows through
// views (no faults, no page-table changes) and writes its result into rz, an array of rows it
// owns, which the update reads back. So every block has one writer, and a step moves the data the
// transpose needs and nothing else. Per step: the right-hand side (the own planes' values, a
// barrier, the fluxes), the x and y solves, a barrier, the z solve, a barrier, the update.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "bench/nas/bt.hpp"
#include "bench/nas/kernel.hpp"

namespace loom::nas::bt {
namespace {

constexpr BtClass kClasses[] = {
    {'S', 12, 60, 1.0e-2,
     {1.7034283709541311e-01, 1.2975252070034097e-02, 3.2527926989486055e-02, 2.6436421275166801e-02, 1.9211784131744430e-01},
     {4.9976913345811579e-04, 4.5195666782961927e-05, 7.3973765172921357e-05, 7.3821238632439731e-05, 8.9269630987491446e-04}},
    {'W', 24, 200, 0.8e-3,
     {0.1125590409344e+03, 0.1180007595731e+02, 0.2710329767846e+02, 0.2469174937669e+02, 0.2638427874317e+03},
     {0.4419655736008e+01, 0.4638531260002e+00, 0.1011551749967e+01, 0.9235878729944e+00, 0.1018045837718e+02}},
    {'A', 64, 200, 0.8e-3,
     {1.0806346714637264e+02, 1.1319730901220813e+01, 2.5974354511582465e+01, 2.3665622544678910e+01, 2.5278963211748344e+02},
     {4.2348416040525025e+00, 4.4390282496995698e-01, 9.6692480136345650e-01, 8.8302063039765474e-01, 9.7379901770829278e+00}},
    {'B', 102, 200, 3.0e-4,
     {1.4233597229287254e+03, 9.9330522590150238e+01, 3.5646025644535285e+02, 3.2485447959084092e+02, 3.2707541254659363e+03},
     {5.2969847140936856e+01, 4.4632896115670668e+00, 1.3122573342210174e+01, 1.2006925323559144e+01, 1.2459576151035986e+02}},
};

}  // namespace

const BtClass& bt_class(char cls) {
  for (const BtClass& c : kClasses)
    if (c.cls == cls) return c;
  throw std::invalid_argument(std::string("BT: no class ") + cls);
}


// The exact solution's coefficients (NPB's ce: 13 terms for each of the 5 components).
constexpr double kCe[13][5] = {
    {2.0, 1.0, 2.0, 2.0, 5.0},     {0.0, 0.0, 2.0, 2.0, 4.0},      {0.0, 0.0, 0.0, 0.0, 3.0},      {4.0, 0.0, 0.0, 0.0, 2.0},
    {5.0, 1.0, 0.0, 0.0, 0.1},     {3.0, 2.0, 2.0, 2.0, 0.4},      {0.5, 3.0, 3.0, 3.0, 0.3},      {0.02, 0.01, 0.04, 0.03, 0.05},
    {0.01, 0.03, 0.03, 0.05, 0.04}, {0.03, 0.02, 0.05, 0.04, 0.03}, {0.5, 0.4, 0.3, 0.2, 0.1},      {0.4, 0.3, 0.5, 0.1, 0.3},
    {0.3, 0.5, 0.4, 0.3, 0.2},
};

void exact_solution(double xi, double eta, double zeta, double* out) {
  for (int m = 0; m < 5; ++m)
    out[m] = kCe[0][m] + xi * (kCe[1][m] + xi * (kCe[4][m] + xi * (kCe[7][m] + xi * kCe[10][m]))) +
             eta * (kCe[2][m] + eta * (kCe[5][m] + eta * (kCe[8][m] + eta * kCe[11][m]))) +
             zeta * (kCe[3][m] + zeta * (kCe[6][m] + zeta * (kCe[9][m] + zeta * kCe[12][m])));
}


Grid::Grid(Team& team, const BtClass& c) : team_(team), k_(c.n, c.dt), sk_(k_.solve()), solver_(sk_, c.n) {
  const size_t n = c.n;
  f_.n = n;
  f_.row = row_doubles(n);
  f_.plane = plane_doubles(n);
  f_.splane = scalar_plane_doubles(n);
  // Members' planes and rows come in groups of g rows (a power of two, at most 64 KiB of them
  // and n / members): the z solve's slab of a plane, and a member's planes of an rz row, are
  // whole blocks of g rows, so a step moves a few large blocks instead of one per row.
  const size_t row_bytes = f_.row * sizeof(double);
  const size_t members = static_cast<size_t>(team.size());
  const size_t g = std::bit_floor(std::max<size_t>(1, std::min(65536 / row_bytes, n / members)));
  f_.u = team.shared<double>(n * f_.plane, g * row_bytes);
  f_.rhs = team.shared<double>(n * f_.plane, g * row_bytes);
  f_.forcing = team.shared<double>(n * f_.plane, g * row_bytes);
  f_.rz = team.shared<double>(n * f_.plane, g * row_bytes);
  for (double** a : {&f_.rho_i, &f_.us, &f_.vs, &f_.ws, &f_.qs, &f_.square}) *a = team.shared<double>(n * f_.splane, f_.splane * sizeof(double));
  for (auto* v : {&views_.u, &views_.rho_i, &views_.us, &views_.vs, &views_.ws, &views_.qs, &views_.square}) v->assign(n, nullptr);
  line_.assign(12 * n, 0.0);
  const Range planes = team.part(n, g);
  k0_ = planes.lo, k1_ = planes.hi;
  ki0_ = std::max<size_t>(k0_, 1), ki1_ = std::min(k1_, n - 1);
  const Range rows = team.part(n, g);
  j0_ = std::max<size_t>(rows.lo, 1), j1_ = std::min(rows.hi, n - 1);
}

// Tri-linear transfinite interpolation of the boundary values, then the exact values on the faces.
void Grid::initialize_plane(size_t k) {
  const size_t n = f_.n;
  const double zeta = static_cast<double>(k) * k_.dnm1[2];
  for (size_t j = 0; j < n; ++j) {
    const double eta = static_cast<double>(j) * k_.dnm1[1];
    for (size_t i = 0; i < n; ++i) {
      const double xi = static_cast<double>(i) * k_.dnm1[0];
      double face[2][3][5];
      for (int s = 0; s < 2; ++s) {
        exact_solution(static_cast<double>(s), eta, zeta, face[s][0]);
        exact_solution(xi, static_cast<double>(s), zeta, face[s][1]);
        exact_solution(xi, eta, static_cast<double>(s), face[s][2]);
      }
      double* u = f_.u + f_.v(k, j, i);
      for (int m = 0; m < 5; ++m) {
        const double pxi = xi * face[1][0][m] + (1.0 - xi) * face[0][0][m];
        const double peta = eta * face[1][1][m] + (1.0 - eta) * face[0][1][m];
        const double pzeta = zeta * face[1][2][m] + (1.0 - zeta) * face[0][2][m];
        u[m] = pxi + peta + pzeta - pxi * peta - pxi * pzeta - peta * pzeta + pxi * peta * pzeta;
      }
    }
  }
  auto exact_at = [&](size_t j, size_t i, double xi, double eta) { exact_solution(xi, eta, zeta, f_.u + f_.v(k, j, i)); };
  for (size_t j = 0; j < n; ++j) {
    const double eta = static_cast<double>(j) * k_.dnm1[1];
    exact_at(j, 0, 0.0, eta);
    exact_at(j, n - 1, 1.0, eta);
  }
  for (size_t i = 0; i < n; ++i) {
    const double xi = static_cast<double>(i) * k_.dnm1[0];
    exact_at(0, i, xi, 0.0);
    exact_at(n - 1, i, xi, 1.0);
  }
  if (k == 0 || k == n - 1)
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < n; ++i)
        exact_solution(static_cast<double>(i) * k_.dnm1[0], static_cast<double>(j) * k_.dnm1[1], k == 0 ? 0.0 : 1.0,
                       f_.u + f_.v(k, j, i));
}

void Grid::initialize() {
  for (size_t k = k0_; k < k1_; ++k) initialize_plane(k);
  team_.barrier();
}

// The x solve along every row of plane k, then the y solve along every column.
void Grid::solve_plane(size_t k) {
  const size_t n = f_.n;
  for (size_t j = 1; j < n - 1; ++j) {
    const size_t v = f_.v(k, j, 0), s = f_.s(k, j, 0);
    solver_.solve(Axis::X, Line{f_.u + v, 5, f_.rhs + v, 5, f_.rho_i + s, f_.qs + s, f_.square + s, 1, n - 1});
  }
  const auto row = static_cast<std::ptrdiff_t>(f_.row), srow = static_cast<std::ptrdiff_t>(n);
  for (size_t i = 1; i < n - 1; ++i) {
    const size_t v = f_.v(k, 0, i), s = f_.s(k, 0, i);
    solver_.solve(Axis::Y, Line{f_.u + v, row, f_.rhs + v, row, f_.rho_i + s, f_.qs + s, f_.square + s, srow, n - 1});
  }
}

// The z solve of the own rows: each line along z gathered from every plane (the others' rows
// through views), solved, and its result written to the own rows of rz.
void Grid::solve_z() {
  if (j1_ <= j0_) return;
  const size_t n = f_.n, rows = j1_ - j0_;
  std::vector<const double*> u(n), r(n), q(n), sq(n);
  for (size_t k = 0; k < n; ++k) {
    auto rows_of = [&](const double* a, size_t at, size_t len) { return own(k) ? a + at : team_.reading(a + at, len); };
    u[k] = rows_of(f_.u, f_.v(k, j0_, 0), rows * f_.row);
    r[k] = rows_of(f_.rhs, f_.v(k, j0_, 0), rows * f_.row);
    q[k] = rows_of(f_.qs, f_.s(k, j0_, 0), rows * n);
    sq[k] = rows_of(f_.square, f_.s(k, j0_, 0), rows * n);
  }
  team_.overwriting(f_.rz + f_.z(j0_, 0, 0), rows * f_.plane);
  double *lu = line_.data(), *lr = lu + 5 * n, *lq = lr + 5 * n, *ls = lq + n;
  for (size_t j = j0_; j < j1_; ++j)
    for (size_t i = 1; i < n - 1; ++i) {
      const size_t v = (j - j0_) * f_.row + 5 * i, s = (j - j0_) * n + i;
      for (size_t k = 0; k < n; ++k) {
        std::memcpy(lu + 5 * k, u[k] + v, 5 * sizeof(double));
        std::memcpy(lr + 5 * k, r[k] + v, 5 * sizeof(double));
        lq[k] = q[k][s];
        ls[k] = sq[k][s];
      }
      solver_.solve(Axis::Z, Line{lu, 5, lr, 5, nullptr, lq, ls, 1, n - 1});
      for (size_t k = 0; k < n; ++k) std::memcpy(f_.rz + f_.z(j, k, i), lr + 5 * k, 5 * sizeof(double));
    }
}

// u += the z solve's result, on the own interior planes (the other members' rows of rz through views).
void Grid::add() {
  if (ki1_ <= ki0_) return;
  const size_t n = f_.n, planes = ki1_ - ki0_;
  team_.overwriting(f_.u + f_.v(k0_, 0, 0), (k1_ - k0_) * f_.plane);  // only this member writes its planes
  for (size_t j = 1; j < n - 1; ++j) {
    const double* at = f_.rz + f_.z(j, ki0_, 0);
    const double* r = j >= j0_ && j < j1_ ? at : team_.reading(at, planes * f_.row);
    for (size_t k = ki0_; k < ki1_; ++k)
      for (size_t i = 1; i < n - 1; ++i) {
        double* u = f_.u + f_.v(k, j, i);
        const double* d = r + (k - ki0_) * f_.row + 5 * i;
        for (int m = 0; m < 5; ++m) u[m] = u[m] + d[m];
      }
  }
}

void Grid::finish_norm(double* rms) {
  team_.sum(rms, 5);
  for (int m = 0; m < 5; ++m) {
    for (int d = 0; d < 3; ++d) rms[m] = rms[m] / static_cast<double>(f_.n - 2);
    rms[m] = std::sqrt(rms[m]);
  }
}

// The RMS norm of the error against the exact solution, over the whole grid.
void Grid::error_norm(double* rms) {
  for (int m = 0; m < 5; ++m) rms[m] = 0.0;
  for (size_t k = k0_; k < k1_; ++k)
    for (size_t j = 0; j < f_.n; ++j)
      for (size_t i = 0; i < f_.n; ++i) {
        double ue[5];
        exact_solution(static_cast<double>(i) * k_.dnm1[0], static_cast<double>(j) * k_.dnm1[1], static_cast<double>(k) * k_.dnm1[2], ue);
        const double* u = f_.u + f_.v(k, j, i);
        for (int m = 0; m < 5; ++m) {
          const double add = u[m] - ue[m];
          rms[m] = rms[m] + add * add;
        }
      }
  finish_norm(rms);
}

// The RMS norm of the right-hand side over the interior.
void Grid::rhs_norm(double* rms) {
  for (int m = 0; m < 5; ++m) rms[m] = 0.0;
  for (size_t k = ki0_; k < ki1_; ++k)
    for (size_t j = 1; j < f_.n - 1; ++j)
      for (size_t i = 1; i < f_.n - 1; ++i) {
        const double* r = f_.rhs + f_.v(k, j, i);
        for (int m = 0; m < 5; ++m) rms[m] = rms[m] + r[m] * r[m];
      }
  finish_norm(rms);
}


}  // namespace loom::nas::bt

namespace loom::nas {

namespace {
// An array and the blocks its region rounds up to.
size_t array_bytes(size_t doubles) { return doubles * sizeof(double) + 2 * 65536; }
}  // namespace

size_t bt_shared_bytes(char cls, int members) {
  const bt::BtClass& c = bt::bt_class(cls);
  const size_t n = c.n;
  (void)members;
  return 4 * array_bytes(n * bt::plane_doubles(n)) + 6 * array_bytes(n * bt::scalar_plane_doubles(n)) + 4096;
}

Result run_bt(Team& team, char cls) {
  const bt::BtClass& c = bt::bt_class(cls);
  bt::Grid g(team, c);
  g.initialize();
  g.exact_rhs();
  // One untimed step (as the reference), then the problem again from the start.
  g.adi();
  g.initialize();
  TeamTimer timer(team);
  for (int step = 1; step <= c.niter; ++step) g.adi();
  Result r;
  r.seconds = timer.stop();
  double xce[5], xcr[5];
  g.error_norm(xce);
  g.compute_rhs();
  g.rhs_norm(xcr);
  for (double& x : xcr) x = x / c.dt;
  const double n3 = static_cast<double>(c.n * c.n * c.n), navg = static_cast<double>(c.n);
  r.kernel = "BT";
  r.cls = cls;
  r.size = std::to_string(c.n) + "x" + std::to_string(c.n) + "x" + std::to_string(c.n);
  r.iterations = c.niter;
  r.operation = "floating point";
  r.mops = r.seconds > 0 ? 1.0e-6 * c.niter * (3478.8 * n3 - 17655.7 * navg * navg + 28023.7 * navg) / r.seconds : 0.0;
  r.verified = true;
  for (int m = 0; m < 5; ++m) r.verified &= check_relative(("xcr" + std::to_string(m + 1)).c_str(), xcr[m], c.xcr[m], 1e-8, r.details);
  for (int m = 0; m < 5; ++m) r.verified &= check_relative(("xce" + std::to_string(m + 1)).c_str(), xce[m], c.xce[m], 1e-8, r.details);
  return r;
}

}  // namespace loom::nas
