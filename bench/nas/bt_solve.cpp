// BT's line solves (bt_solve.hpp). The jacobians and the block operations keep NPB's
// expressions and their order of operations, so that the results match the reference values to
// the last bits the verification looks at.
#include "bench/nas/bt_solve.hpp"

namespace loom::nas::bt {
namespace {

using M = double[5][5];

// Gauss-Jordan on the block `a` without pivoting, carrying c (a block) and r along: a becomes
// the identity, c becomes a^-1 c and r becomes a^-1 r (NPB's binvcrhs; binvrhs without c).
void binvcrhs(M& a, M* c, double* r) {
  for (int p = 0; p < 5; ++p) {
    const double pivot = 1.00 / a[p][p];
    for (int col = p + 1; col < 5; ++col) a[col][p] = a[col][p] * pivot;
    if (c != nullptr)
      for (int col = 0; col < 5; ++col) (*c)[col][p] = (*c)[col][p] * pivot;
    r[p] = r[p] * pivot;
    for (int row = 0; row < 5; ++row) {
      if (row == p) continue;
      const double coeff = a[p][row];
      for (int col = p + 1; col < 5; ++col) a[col][row] = a[col][row] - coeff * a[col][p];
      if (c != nullptr)
        for (int col = 0; col < 5; ++col) (*c)[col][row] = (*c)[col][row] - coeff * (*c)[col][p];
      r[row] = r[row] - coeff * r[p];
    }
  }
}

// b = b - a v.
void matvec_sub(const M& a, const double* v, double* b) {
  for (int row = 0; row < 5; ++row) {
    double s = b[row];
    for (int k = 0; k < 5; ++k) s = s - a[k][row] * v[k];
    b[row] = s;
  }
}

// c = c - a b.
void matmul_sub(const M& a, const M& b, M& c) {
  for (int col = 0; col < 5; ++col)
    for (int row = 0; row < 5; ++row) {
      double s = c[col][row];
      for (int k = 0; k < 5; ++k) s = s - a[k][row] * b[col][k];
      c[col][row] = s;
    }
}

void clear(M& m) {
  for (auto& col : m)
    for (double& x : col) x = 0.0;
}

// The flux jacobian f and the viscous jacobian n of one point for each axis (NPB's fjac, njac).
struct PointJacobians {
  const SolveConstants& k;
  double u0, u1, u2, u3, u4, tmp1, tmp2, tmp3, qs, sq;

  void x(M& f, M& n) const {
    const double c1 = k.c1, c2 = k.c2, c3c4 = k.c3c4, c1345 = k.c1345, con43 = k.con43;
    clear(f);
    clear(n);
    f[1][0] = 1.0;
    f[0][1] = -(u1 * tmp2 * u1) + c2 * qs;
    f[1][1] = (2.0 - c2) * (u1 / u0);
    f[2][1] = -c2 * (u2 * tmp1);
    f[3][1] = -c2 * (u3 * tmp1);
    f[4][1] = c2;
    f[0][2] = -(u1 * u2) * tmp2;
    f[1][2] = u2 * tmp1;
    f[2][2] = u1 * tmp1;
    f[0][3] = -(u1 * u3) * tmp2;
    f[1][3] = u3 * tmp1;
    f[3][3] = u1 * tmp1;
    f[0][4] = (c2 * 2.0 * sq - c1 * u4) * (u1 * tmp2);
    f[1][4] = c1 * u4 * tmp1 - c2 * (u1 * u1 * tmp2 + qs);
    f[2][4] = -c2 * (u2 * u1) * tmp2;
    f[3][4] = -c2 * (u3 * u1) * tmp2;
    f[4][4] = c1 * (u1 * tmp1);
    n[0][1] = -con43 * c3c4 * tmp2 * u1;
    n[1][1] = con43 * c3c4 * tmp1;
    n[0][2] = -c3c4 * tmp2 * u2;
    n[2][2] = c3c4 * tmp1;
    n[0][3] = -c3c4 * tmp2 * u3;
    n[3][3] = c3c4 * tmp1;
    n[0][4] = -(con43 * c3c4 - c1345) * tmp3 * (u1 * u1) - (c3c4 - c1345) * tmp3 * (u2 * u2) - (c3c4 - c1345) * tmp3 * (u3 * u3) -
              c1345 * tmp2 * u4;
    n[1][4] = (con43 * c3c4 - c1345) * tmp2 * u1;
    n[2][4] = (c3c4 - c1345) * tmp2 * u2;
    n[3][4] = (c3c4 - c1345) * tmp2 * u3;
    n[4][4] = (c1345)*tmp1;
  }

  void y(M& f, M& n) const {
    const double c1 = k.c1, c2 = k.c2, c3c4 = k.c3c4, c1345 = k.c1345, con43 = k.con43;
    clear(f);
    clear(n);
    f[2][0] = 1.0;
    f[0][1] = -(u1 * u2) * tmp2;
    f[1][1] = u2 * tmp1;
    f[2][1] = u1 * tmp1;
    f[0][2] = -(u2 * u2 * tmp2) + c2 * qs;
    f[1][2] = -c2 * u1 * tmp1;
    f[2][2] = (2.0 - c2) * u2 * tmp1;
    f[3][2] = -c2 * u3 * tmp1;
    f[4][2] = c2;
    f[0][3] = -(u2 * u3) * tmp2;
    f[2][3] = u3 * tmp1;
    f[3][3] = u2 * tmp1;
    f[0][4] = (c2 * 2.0 * sq - c1 * u4) * u2 * tmp2;
    f[1][4] = -c2 * u1 * u2 * tmp2;
    f[2][4] = c1 * u4 * tmp1 - c2 * (qs + u2 * u2 * tmp2);
    f[3][4] = -c2 * (u2 * u3) * tmp2;
    f[4][4] = c1 * u2 * tmp1;
    n[0][1] = -c3c4 * tmp2 * u1;
    n[1][1] = c3c4 * tmp1;
    n[0][2] = -con43 * c3c4 * tmp2 * u2;
    n[2][2] = con43 * c3c4 * tmp1;
    n[0][3] = -c3c4 * tmp2 * u3;
    n[3][3] = c3c4 * tmp1;
    n[0][4] = -(c3c4 - c1345) * tmp3 * (u1 * u1) - (con43 * c3c4 - c1345) * tmp3 * (u2 * u2) - (c3c4 - c1345) * tmp3 * (u3 * u3) -
              c1345 * tmp2 * u4;
    n[1][4] = (c3c4 - c1345) * tmp2 * u1;
    n[2][4] = (con43 * c3c4 - c1345) * tmp2 * u2;
    n[3][4] = (c3c4 - c1345) * tmp2 * u3;
    n[4][4] = (c1345)*tmp1;
  }

  void z(M& f, M& n) const {
    const double c1 = k.c1, c2 = k.c2, c3 = k.c3, c4 = k.c4, c3c4 = k.c3c4, c1345 = k.c1345, con43 = k.con43;
    clear(f);
    clear(n);
    f[3][0] = 1.0;
    f[0][1] = -(u1 * u3) * tmp2;
    f[1][1] = u3 * tmp1;
    f[3][1] = u1 * tmp1;
    f[0][2] = -(u2 * u3) * tmp2;
    f[2][2] = u3 * tmp1;
    f[3][2] = u2 * tmp1;
    f[0][3] = -(u3 * u3 * tmp2) + c2 * qs;
    f[1][3] = -c2 * u1 * tmp1;
    f[2][3] = -c2 * u2 * tmp1;
    f[3][3] = (2.0 - c2) * u3 * tmp1;
    f[4][3] = c2;
    f[0][4] = (c2 * 2.0 * sq - c1 * u4) * u3 * tmp2;
    f[1][4] = -c2 * (u1 * u3) * tmp2;
    f[2][4] = -c2 * (u2 * u3) * tmp2;
    f[3][4] = c1 * (u4 * tmp1) - c2 * (qs + u3 * u3 * tmp2);
    f[4][4] = c1 * u3 * tmp1;
    n[0][1] = -c3c4 * tmp2 * u1;
    n[1][1] = c3c4 * tmp1;
    n[0][2] = -c3c4 * tmp2 * u2;
    n[2][2] = c3c4 * tmp1;
    n[0][3] = -con43 * c3c4 * tmp2 * u3;
    n[3][3] = con43 * c3 * c4 * tmp1;
    n[0][4] = -(c3c4 - c1345) * tmp3 * (u1 * u1) - (c3c4 - c1345) * tmp3 * (u2 * u2) - (con43 * c3c4 - c1345) * tmp3 * (u3 * u3) -
              c1345 * tmp2 * u4;
    n[1][4] = (c3c4 - c1345) * tmp2 * u1;
    n[2][4] = (c3c4 - c1345) * tmp2 * u2;
    n[3][4] = (con43 * c3c4 - c1345) * tmp2 * u3;
    n[4][4] = (c1345)*tmp1;
  }
};

}  // namespace

void LineSolver::jacobians(Axis axis, const Line& l) {
  for (size_t p = 0; p <= l.last; ++p) {
    const double* u = l.u + static_cast<std::ptrdiff_t>(p) * l.u_step;
    const std::ptrdiff_t s = static_cast<std::ptrdiff_t>(p) * l.s_step;
    const double tmp1 = axis == Axis::Z ? 1.0 / u[0] : l.rho[s];
    const double tmp2 = tmp1 * tmp1;
    const PointJacobians j{k_, u[0], u[1], u[2], u[3], u[4], tmp1, tmp2, tmp1 * tmp2, l.qs[s], l.square[s]};
    if (axis == Axis::X) j.x(fjac_[p].v, njac_[p].v);
    else if (axis == Axis::Y) j.y(fjac_[p].v, njac_[p].v);
    else j.z(fjac_[p].v, njac_[p].v);
  }
}

// The block rows: A (below the diagonal), B (on it), C (above) of points 1..last-1; the first
// and last rows are the identity (NPB's lhsinit).
void LineSolver::form_lhs(Axis axis, size_t last) {
  const int a = static_cast<int>(axis);
  const double tmp1 = k_.dt * k_.t1[a], tmp2 = k_.dt * k_.t2[a];
  const double* d = k_.d[a];
  for (size_t p : {size_t{0}, last}) {
    clear(lhs_[p].aa.v);
    clear(lhs_[p].bb.v);
    clear(lhs_[p].cc.v);
    for (int m = 0; m < 5; ++m) lhs_[p].bb.v[m][m] = 1.0;
  }
  for (size_t p = 1; p < last; ++p) {
    const M& fm = fjac_[p - 1].v;
    const M& nm = njac_[p - 1].v;
    const M& n0 = njac_[p].v;
    const M& fp = fjac_[p + 1].v;
    const M& np = njac_[p + 1].v;
    Row& r = lhs_[p];
    for (int col = 0; col < 5; ++col)
      for (int row = 0; row < 5; ++row) {
        if (col == row) {
          r.aa.v[col][row] = -tmp2 * fm[col][row] - tmp1 * nm[col][row] - tmp1 * d[col];
          r.bb.v[col][row] = 1.0 + tmp1 * 2.0 * n0[col][row] + tmp1 * 2.0 * d[col];
          r.cc.v[col][row] = tmp2 * fp[col][row] - tmp1 * np[col][row] - tmp1 * d[col];
        } else {
          r.aa.v[col][row] = -tmp2 * fm[col][row] - tmp1 * nm[col][row];
          r.bb.v[col][row] = tmp1 * 2.0 * n0[col][row];
          r.cc.v[col][row] = tmp2 * fp[col][row] - tmp1 * np[col][row];
        }
      }
  }
}

void LineSolver::solve(Axis axis, const Line& l) {
  const size_t last = l.last;
  auto r = [&](size_t p) { return l.r + static_cast<std::ptrdiff_t>(p) * l.r_step; };
  jacobians(axis, l);
  form_lhs(axis, last);
  binvcrhs(lhs_[0].bb.v, &lhs_[0].cc.v, r(0));
  for (size_t p = 1; p < last; ++p) {
    matvec_sub(lhs_[p].aa.v, r(p - 1), r(p));
    matmul_sub(lhs_[p].aa.v, lhs_[p - 1].cc.v, lhs_[p].bb.v);
    binvcrhs(lhs_[p].bb.v, &lhs_[p].cc.v, r(p));
  }
  matvec_sub(lhs_[last].aa.v, r(last - 1), r(last));
  matmul_sub(lhs_[last].aa.v, lhs_[last - 1].cc.v, lhs_[last].bb.v);
  binvcrhs(lhs_[last].bb.v, nullptr, r(last));
  for (size_t p = last; p-- > 0;) {
    double* x = r(p);
    const double* next = r(p + 1);
    for (int m = 0; m < 5; ++m)
      for (int n = 0; n < 5; ++n) x[m] = x[m] - lhs_[p].cc.v[n][m] * next[n];
  }
}

}  // namespace loom::nas::bt
