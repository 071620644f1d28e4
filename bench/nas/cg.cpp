// CG: the inverse power method on NPB's random sparse matrix, 25 unpreconditioned conjugate-
// gradient steps per outer iteration; verified by zeta (1e-10). The vectors live in shared
// memory; each member builds and multiplies the rows it owns (its part of the vectors), reads
// the whole of r to form its own copy of the search direction, and the whole of z once per
// outer iteration.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "bench/nas/kernel.hpp"
#include "bench/nas/lcg.hpp"

namespace loom::nas {
namespace {

struct CgClass {
  char cls;
  int na, nonzer, niter;
  double shift, zeta;
};

constexpr CgClass kClasses[] = {
    {'S', 1400, 7, 15, 10, 8.5971775078648},
    {'W', 7000, 8, 15, 12, 10.362595087124},
    {'A', 14000, 11, 15, 20, 17.130235054029},
    {'B', 75000, 13, 75, 60, 22.712745482631},
};
constexpr double kRcond = 0.1;
constexpr int kCgSteps = 25;

const CgClass& cg_class(char cls) {
  for (const CgClass& c : kClasses)
    if (c.cls == cls) return c;
  throw std::invalid_argument(std::string("CG: no class ") + cls);
}

// The rows [lo, hi) of the matrix, compressed (columns 0-based, ascending in each row).
struct Rows {
  size_t lo = 0, hi = 0;
  std::vector<size_t> start;  // row i - lo starts at start[i - lo]
  std::vector<int> col;
  std::vector<double> val;
};

// One generated sparse vector of NPB's makea: up to nonzer + 1 (column, value) pairs, 1-based.
struct SparseVec {
  std::vector<int> idx;
  std::vector<double> val;
};

// sprnvc then vecset: nonzer distinct random positions in [1, n] with random values, then
// position `row` set to 0.5 (replaced if drawn, else appended).
SparseVec generate(Lcg& g, int n, int nn1, int nonzer, int row) {
  SparseVec v;
  while (static_cast<int>(v.idx.size()) < nonzer) {
    const double value = g.next();
    const int i = static_cast<int>(nn1 * g.next()) + 1;
    if (i > n || std::find(v.idx.begin(), v.idx.end(), i) != v.idx.end()) continue;
    v.idx.push_back(i);
    v.val.push_back(value);
  }
  bool set = false;
  for (size_t k = 0; k < v.idx.size(); ++k)
    if (v.idx[k] == row) {
      v.val[k] = 0.5;
      set = true;
    }
  if (!set) {
    v.idx.push_back(row);
    v.val.push_back(0.5);
  }
  return v;
}

// NPB's makea restricted to rows [lo, hi): the sum over outer vectors i of
// size_i * (v_i v_i^T), with rcond - shift added on the diagonal, accumulated per (row, column)
// in the order of i, as the reference does.
Rows make_rows(const CgClass& c, size_t lo, size_t hi) {
  const int n = c.na;
  int nn1 = 1;
  do nn1 *= 2;
  while (nn1 < n);
  Lcg g(314159265);
  g.next();  // the reference draws zeta's random first
  std::vector<std::vector<std::pair<int, double>>> rows(hi - lo);
  const double ratio = std::pow(kRcond, 1.0 / static_cast<double>(n));
  double size = 1.0;
  for (int i = 1; i <= n; ++i) {
    const SparseVec v = generate(g, n, nn1, c.nonzer, i);
    for (size_t a = 0; a < v.idx.size(); ++a) {
      const int j = v.idx[a];
      if (static_cast<size_t>(j - 1) < lo || static_cast<size_t>(j - 1) >= hi) continue;
      const double scale = size * v.val[a];
      auto& row = rows[static_cast<size_t>(j - 1) - lo];
      for (size_t b = 0; b < v.idx.size(); ++b) {
        const int jcol = v.idx[b];
        double va = v.val[b] * scale;
        if (jcol == j && j == i) va = va + kRcond - c.shift;
        auto it = std::lower_bound(row.begin(), row.end(), jcol, [](const std::pair<int, double>& e, int k) { return e.first < k; });
        if (it == row.end() || it->first != jcol) it = row.insert(it, {jcol, 0.0});
        it->second = it->second + va;
      }
    }
    size *= ratio;
  }
  Rows m;
  m.lo = lo;
  m.hi = hi;
  m.start.push_back(0);
  for (const auto& row : rows) {
    for (const auto& [col, v] : row) {
      m.col.push_back(col - 1);
      m.val.push_back(v);
    }
    m.start.push_back(m.col.size());
  }
  return m;
}

// out[i] = (A v)[i] for the rows of m (out indexed like v).
void multiply(const Rows& m, const double* v, double* out) {
  for (size_t i = m.lo; i < m.hi; ++i) {
    double s = 0;
    for (size_t k = m.start[i - m.lo]; k < m.start[i - m.lo + 1]; ++k) s += m.val[k] * v[m.col[k]];
    out[i] = s;
  }
}

// The shared vectors. x, q, z and r are written by their owners in parts; z and r are read
// whole by everyone (z for the residual, r to form the search direction).
struct Vectors {
  double *x, *z, *q, *r;
};

// NPB's conj_grad: z from 25 CG steps on A z = x; returns ||x - A z||. Every member keeps the
// whole search direction p in its own memory and updates it from the whole of r after the sum
// that gives beta: the same operations as updating parts of a shared p, without the barrier a
// shared p would need before each product.
double conj_grad(Team& team, const Rows& m, const Vectors& v, std::vector<double>& p, size_t n) {
  const size_t lo = m.lo, hi = m.hi;
  double rho = 0;
  // z and r are read by everyone (r at every step, z after the last): their parts are named as
  // written in bulk before each pass that writes them (no fault per block).
  double* z = team.writing(v.z + lo, hi - lo) - lo;
  double* rw = team.writing(v.r + lo, hi - lo) - lo;
  for (size_t j = lo; j < hi; ++j) {
    v.q[j] = 0;
    z[j] = 0;
    rw[j] = v.x[j];
    rho += rw[j] * rw[j];
  }
  rho = team.sum(rho);
  const double* r = team.reading(v.r, n);
  std::copy(r, r + n, p.begin());
  for (int step = 0; step < kCgSteps; ++step) {
    multiply(m, p.data(), v.q);
    double d = 0;
    for (size_t j = lo; j < hi; ++j) d += p[j] * v.q[j];
    d = team.sum(d);
    const double alpha = rho / d, rho0 = rho;
    rho = 0;
    z = team.writing(v.z + lo, hi - lo) - lo;
    rw = team.writing(v.r + lo, hi - lo) - lo;
    for (size_t j = lo; j < hi; ++j) {
      z[j] = z[j] + alpha * p[j];
      rw[j] = rw[j] - alpha * v.q[j];
      rho += rw[j] * rw[j];
    }
    rho = team.sum(rho);
    if (step + 1 == kCgSteps) break;  // the last direction is never used (and r is rewritten below)
    const double beta = rho / rho0;
    r = team.reading(v.r, n);
    for (size_t j = 0; j < n; ++j) p[j] = r[j] + beta * p[j];
  }
  multiply(m, team.reading(v.z, n), v.r);
  double sum = 0;
  for (size_t j = lo; j < hi; ++j) {
    const double d = v.x[j] - v.r[j];
    sum += d * d;
  }
  return std::sqrt(team.sum(sum));
}

// One outer iteration after conj_grad: x = z / ||z||; returns x.z before the scaling.
double normalize(Team& team, const Rows& m, const Vectors& v) {
  double t[2] = {0, 0};
  for (size_t j = m.lo; j < m.hi; ++j) {
    t[0] += v.x[j] * v.z[j];
    t[1] += v.z[j] * v.z[j];
  }
  team.sum(t, 2);
  const double scale = 1.0 / std::sqrt(t[1]);
  for (size_t j = m.lo; j < m.hi; ++j) v.x[j] = scale * v.z[j];
  return t[0];
}

}  // namespace

size_t cg_shared_bytes(char cls, int) { return 4 * (static_cast<size_t>(cg_class(cls).na) * sizeof(double) + 4096); }

Result run_cg(Team& team, char cls) {
  const CgClass& c = cg_class(cls);
  const size_t n = static_cast<size_t>(c.na);
  const Vectors v{team.shared<double>(n), team.shared<double>(n), team.shared<double>(n), team.shared<double>(n)};
  std::vector<double> p(n);  // this member's copy of the search direction
  const Range mine = team.part(n, team.unit() / sizeof(double));  // parts of whole blocks
  const Rows m = make_rows(c, mine.lo, mine.hi);
  // One untimed iteration (as the reference), then x = 1 again.
  for (size_t j = mine.lo; j < mine.hi; ++j) v.x[j] = 1.0;
  conj_grad(team, m, v, p, n);
  normalize(team, m, v);
  for (size_t j = mine.lo; j < mine.hi; ++j) v.x[j] = 1.0;
  double zeta = 0, rnorm = 0;
  TeamTimer timer(team);
  for (int it = 1; it <= c.niter; ++it) {
    rnorm = conj_grad(team, m, v, p, n);
    zeta = c.shift + 1.0 / normalize(team, m, v);
  }
  Result r;
  r.seconds = timer.stop();
  r.kernel = "CG";
  r.cls = cls;
  r.size = std::to_string(c.na);
  r.iterations = c.niter;
  r.operation = "floating point";
  const double nz = static_cast<double>(c.nonzer) * (c.nonzer + 1);
  r.mops = 1e-6 * 2 * c.niter * static_cast<double>(c.na) * (3.0 + nz + 25.0 * (5.0 + nz) + 3.0) / r.seconds;
  r.verified = check_relative("zeta", zeta, c.zeta, 1e-10, r.details);
  char line[80];
  std::snprintf(line, sizeof line, "rnorm      %22.15e", rnorm);
  r.details.emplace_back(line);
  return r;
}

}  // namespace loom::nas
