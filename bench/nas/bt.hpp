#pragma once
// BT's grid, fields and the phases of a time step (bt.cpp: the driver, the z solve, the update;
// bt_rhs.cpp: the right-hand side and the forcing term; bt_solve.hpp: the line solves).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <vector>

#include "bench/nas/bt_solve.hpp"
#include "bench/nas/team.hpp"

namespace loom::nas::bt {

struct BtClass {
  char cls;
  size_t n;
  int niter;
  double dt;
  double xcr[5];  // RMS norms of the residual
  double xce[5];  // RMS norms of the error
};
const BtClass& bt_class(char cls);  // throws std::invalid_argument on a bad class

// The exact solution at a point of the unit cube.
void exact_solution(double xi, double eta, double zeta, double* out);

// NPB's set_constants, for one grid and time step (the three directions' coefficients indexed
// by axis: 0 = x (xi), 1 = y (eta), 2 = z (zeta)).
struct Constants {
  double dnm1[3], t1[3], t2[3], t3[3], d[3][5];
  double dssp, dt, c1, c2, c3, c4, c5, c1c2, c1c5, c3c4, c1345, conz1, con43, con16;
  double con[3][5];  // xxcon1..5, yycon1..5, zzcon1..5
  double dt1[3][5];  // dx1tx1..dx5tx1, dy1ty1.., dz1tz1..

  Constants(size_t n, double step) : dt(step) {
    c1 = 1.4, c2 = 0.4, c3 = 0.1, c4 = 1.0, c5 = 1.4;
    c1c2 = c1 * c2, c1c5 = c1 * c5, c3c4 = c3 * c4, c1345 = c1c5 * c3c4, conz1 = 1.0 - c1c5;
    con43 = 4.0 / 3.0, con16 = 1.0 / 6.0;
    for (int a = 0; a < 3; ++a) {
      dnm1[a] = 1.0 / static_cast<double>(n - 1);
      t1[a] = 1.0 / (dnm1[a] * dnm1[a]);
      t2[a] = 1.0 / (2.0 * dnm1[a]);
      t3[a] = 1.0 / dnm1[a];
      for (int m = 0; m < 5; ++m) d[a][m] = a < 2 ? 0.75 : 1.0;
    }
    dssp = 0.25 * std::max(d[0][0], std::max(d[1][0], d[2][0]));
    for (int a = 0; a < 3; ++a) {
      const double c3c4t3 = c3c4 * t3[a];
      con[a][0] = c3c4t3 * con43 * t3[a];
      con[a][1] = c3c4t3 * t3[a];
      con[a][2] = c3c4t3 * conz1 * t3[a];
      con[a][3] = c3c4t3 * con16 * t3[a];
      con[a][4] = c3c4t3 * c1c5 * t3[a];
      for (int m = 0; m < 5; ++m) dt1[a][m] = d[a][m] * t1[a];
    }
  }

  SolveConstants solve() const {
    SolveConstants s{c1, c2, c3, c4, c3c4, c1345, con43, dt, {t1[0], t1[1], t1[2]}, {t2[0], t2[1], t2[2]}, {}};
    for (int a = 0; a < 3; ++a)
      for (int m = 0; m < 5; ++m) s.d[a][m] = d[a][m];
    return s;
  }
};


// The shared arrays. The 5-component ones pad each row to a power of two bytes, so that a row is
// a block or a whole number of rows is, and each plane to whole 4 KiB, as the scalar ones do:
// every member's pieces are whole blocks. u, rhs, forcing and the scalars are [k][j][i]
// (members own planes); rz, the z solve's result, is [j][k][i] (members own rows).
struct Fields {
  size_t n = 0;
  size_t row = 0, plane = 0;  // doubles per row and per plane of the 5-component arrays
  size_t splane = 0;          // doubles per plane of the scalar arrays
  double *u = nullptr, *rhs = nullptr, *forcing = nullptr, *rz = nullptr;
  double *rho_i = nullptr, *us = nullptr, *vs = nullptr, *ws = nullptr, *qs = nullptr, *square = nullptr;

  size_t v(size_t k, size_t j, size_t i) const { return k * plane + j * row + 5 * i; }
  size_t s(size_t k, size_t j, size_t i) const { return k * splane + j * n + i; }
  size_t z(size_t j, size_t k, size_t i) const { return j * plane + k * row + 5 * i; }
};

inline constexpr size_t kPageDoubles = 4096 / sizeof(double);
inline size_t row_doubles(size_t n) { return std::bit_ceil(n * 5 * sizeof(double)) / sizeof(double); }
inline size_t pages_of(size_t doubles) { return (doubles + kPageDoubles - 1) / kPageDoubles * kPageDoubles; }
inline size_t plane_doubles(size_t n) { return pages_of(n * row_doubles(n)); }
inline size_t scalar_plane_doubles(size_t n) { return pages_of(n * n); }

// The planes of the arrays a member reads: its own in place, another member's through a view
// (Team::reading) that costs no fault.
struct PlaneViews {
  std::vector<const double*> u, rho_i, us, vs, ws, qs, square;  // [k]; null: not named this step
};

class Grid {
 public:
  Grid(Team& team, const BtClass& c);

  void initialize();
  void exact_rhs();
  // One time step: the right-hand side, the x and y solves of the own planes, the z solve of
  // the own rows (into rz), the update of the own planes.
  void adi() {
    compute_rhs();
    for (size_t k = ki0_; k < ki1_; ++k) solve_plane(k);
    team_.barrier();  // the z solve reads every member's planes
    solve_z();
    team_.barrier();  // the update reads every member's rows of rz
    add();
  }
  void compute_rhs();
  void error_norm(double* rms);
  void rhs_norm(double* rms);

 private:
  void initialize_plane(size_t k);
  void exact_forcing_plane(size_t k);
  void name_flux_planes();
  void fluxes(size_t k);
  void solve_plane(size_t k);
  void solve_z();
  void add();
  void finish_norm(double* rms);
  bool own(size_t k) const { return k >= k0_ && k < k1_; }
  // Plane k of `a`: the own one in place, another member's through a view.
  const double* plane_of(const double* a, size_t plane, size_t k) {
    return own(k) ? a + k * plane : team_.reading(a + k * plane, plane);
  }

  Team& team_;
  const Constants k_;
  const SolveConstants sk_;
  LineSolver solver_;
  Fields f_;
  PlaneViews views_;
  std::vector<double> line_;  // one z line gathered: u, rhs (5 each) and qs, square per point
  size_t k0_ = 0, k1_ = 0;    // own planes
  size_t ki0_ = 0, ki1_ = 0;  // own interior planes (1..n-2)
  size_t j0_ = 0, j1_ = 0;    // own interior rows of the z solve
};

}  // namespace loom::nas::bt
