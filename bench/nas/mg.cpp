// MG: V-cycle multigrid on NPB's periodic 3-D Poisson problem; verified by the L2 norm of the
// final residual (1e-8). Every level's grids are shared arrays of (2 + 2^k)^3 points with one
// ghost layer; members own pairs of z planes (planes 2q and 2q + 1), compute the interior planes
// of their pairs, and read the neighbouring planes of others after a barrier.
#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "bench/nas/kernel.hpp"
#include "bench/nas/lcg.hpp"

namespace loom::nas {
namespace {

struct MgClass {
  char cls;
  int log2n, nit;
  double rnm2;
};

constexpr MgClass kClasses[] = {
    {'S', 5, 4, 0.5307707005734e-04},
    {'W', 7, 4, 0.6467329375339e-05},
    {'A', 8, 4, 0.2433365309069e-05},
    {'B', 8, 20, 0.1800564401355e-05},
};

const MgClass& mg_class(char cls) {
  for (const MgClass& c : kClasses)
    if (c.cls == cls) return c;
  throw std::invalid_argument(std::string("MG: no class ") + cls);
}

constexpr double kA[4] = {-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0};
constexpr double kCSmall[4] = {-3.0 / 8.0, +1.0 / 32.0, -1.0 / 64.0, 0.0};  // S, W, A
constexpr double kCLarge[4] = {-3.0 / 17.0, +1.0 / 33.0, -1.0 / 61.0, 0.0};  // B

// One level: an n^3 grid (n = 2 + 2^k) and this member's planes.
struct Level {
  double* u = nullptr;
  double* r = nullptr;
  size_t n = 0;
  size_t first = 0, last = 0;  // owned planes [first, last) (pairs, ghosts included)
  size_t lo = 0, hi = 0;       // owned interior planes [lo, hi)
  size_t at(size_t i1, size_t i2, size_t i3) const { return i1 + n * (i2 + n * i3); }
  size_t plane() const { return n * n; }
};

class Multigrid {
 public:
  Multigrid(Team& team, const MgClass& c) : team_(team), c_(c), top_(static_cast<size_t>(c.log2n)), cc_(c.cls == 'B' ? kCLarge : kCSmall) {
    levels_.resize(top_ + 1);
    for (size_t k = 1; k <= top_; ++k) {
      Level& l = levels_[k];
      l.n = 2 + (size_t{1} << k);
      const size_t cells = l.n * l.n * l.n;
      l.u = team.shared<double>(cells);
      l.r = team.shared<double>(cells);
      const Range pairs = team.part(l.n / 2);
      l.first = 2 * pairs.lo;
      l.last = 2 * pairs.hi;
      l.lo = std::max<size_t>(l.first, 1);
      l.hi = std::min(l.last, l.n - 1);
    }
    v_ = team.shared<double>(levels_[top_].n * levels_[top_].n * levels_[top_].n);
    const size_t n = levels_[top_].n;
    work_.assign(3 * n, 0.0);
  }

  // zero3(u) and zran3(v) on the top level.
  void init() {
    zero(levels_[top_].u, levels_[top_]);
    random_charges();
  }

  void resid_top() { resid(levels_[top_].u, v_, levels_[top_].r, levels_[top_]); }
  void v_cycle();
  double norm() const;  // rnm2 of the top residual

 private:
  void zero(double* g, const Level& l) {
    if (l.first < l.last) std::fill(g + l.first * l.plane(), g + l.last * l.plane(), 0.0);
  }
  void comm3(double* g, const Level& l);
  void resid(const double* u, const double* v, double* r, const Level& l);
  void psinv(const double* r, double* u, const Level& l);
  void rprj3(const double* r, const Level& fine, double* s, const Level& coarse);
  void interp(const double* z, const Level& coarse, double* u, const Level& fine);
  void random_charges();

  Team& team_;
  const MgClass& c_;
  const size_t top_;
  const double* cc_;
  std::vector<Level> levels_;  // 1..top
  double* v_ = nullptr;
  std::vector<double> work_;
};

// Periodic ghosts: x and y within each owned interior plane, then (after a barrier) the ghost
// planes from their periodic images.
void Multigrid::comm3(double* g, const Level& l) {
  const size_t n = l.n;
  for (size_t i3 = l.lo; i3 < l.hi; ++i3) {
    for (size_t i2 = 1; i2 < n - 1; ++i2) {
      g[l.at(0, i2, i3)] = g[l.at(n - 2, i2, i3)];
      g[l.at(n - 1, i2, i3)] = g[l.at(1, i2, i3)];
    }
    for (size_t i1 = 0; i1 < n; ++i1) {
      g[l.at(i1, 0, i3)] = g[l.at(i1, n - 2, i3)];
      g[l.at(i1, n - 1, i3)] = g[l.at(i1, 1, i3)];
    }
  }
  team_.barrier();
  if (l.first == 0 && l.last > 0) {  // the owner of plane 0 (a member without planes has first == last)
    const double* src = team_.reading(g + l.at(0, 0, n - 2), l.plane());
    std::copy(src, src + l.plane(), g);
  }
  if (l.last == n && l.first < n) {
    const double* src = team_.reading(g + l.at(0, 0, 1), l.plane());
    std::copy(src, src + l.plane(), g + l.at(0, 0, n - 1));
  }
  team_.barrier();
}

// The 4 face-neighbour sums s1 and the 4 edge-neighbour sums s2 of g's points (i1, i2, i3),
// i1 = 0..n-1, in the planes i3 - 1, i3, i3 + 1 and rows i2 - 1, i2 + 1.
void neighbour_sums(const double* g, const Level& l, size_t i2, size_t i3, double* s1, double* s2) {
  for (size_t i1 = 0; i1 < l.n; ++i1) {
    s1[i1] = g[l.at(i1, i2 - 1, i3)] + g[l.at(i1, i2 + 1, i3)] + g[l.at(i1, i2, i3 - 1)] + g[l.at(i1, i2, i3 + 1)];
    s2[i1] = g[l.at(i1, i2 - 1, i3 - 1)] + g[l.at(i1, i2 + 1, i3 - 1)] + g[l.at(i1, i2 - 1, i3 + 1)] + g[l.at(i1, i2 + 1, i3 + 1)];
  }
}

void Multigrid::resid(const double* u, const double* v, double* r, const Level& l) {
  const size_t n = l.n;
  double *u1 = work_.data(), *u2 = u1 + n;
  for (size_t i3 = l.lo; i3 < l.hi; ++i3)
    for (size_t i2 = 1; i2 < n - 1; ++i2) {
      neighbour_sums(u, l, i2, i3, u1, u2);
      for (size_t i1 = 1; i1 < n - 1; ++i1)
        r[l.at(i1, i2, i3)] = v[l.at(i1, i2, i3)] - kA[0] * u[l.at(i1, i2, i3)] - kA[2] * (u2[i1] + u1[i1 - 1] + u1[i1 + 1]) -
                              kA[3] * (u2[i1 - 1] + u2[i1 + 1]);
    }
  comm3(r, l);
}

void Multigrid::psinv(const double* r, double* u, const Level& l) {
  const size_t n = l.n;
  double *r1 = work_.data(), *r2 = r1 + n;
  for (size_t i3 = l.lo; i3 < l.hi; ++i3)
    for (size_t i2 = 1; i2 < n - 1; ++i2) {
      neighbour_sums(r, l, i2, i3, r1, r2);
      for (size_t i1 = 1; i1 < n - 1; ++i1)
        u[l.at(i1, i2, i3)] = u[l.at(i1, i2, i3)] + cc_[0] * r[l.at(i1, i2, i3)] + cc_[1] * (r[l.at(i1 - 1, i2, i3)] + r[l.at(i1 + 1, i2, i3)] + r1[i1]) +
                              cc_[2] * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
    }
  comm3(u, l);
}

// Restriction of the fine residual r onto the coarse grid s (coarse point c sits on fine 2c).
void Multigrid::rprj3(const double* r, const Level& f, double* s, const Level& c) {
  double *x1 = work_.data(), *y1 = x1 + f.n;
  for (size_t c3 = c.lo; c3 < c.hi; ++c3)
    for (size_t c2 = 1; c2 < c.n - 1; ++c2) {
      const size_t i3 = 2 * c3, i2 = 2 * c2;
      for (size_t c1 = 1; c1 < c.n; ++c1) {
        const size_t i = 2 * c1 - 1;
        x1[i] = r[f.at(i, i2 - 1, i3)] + r[f.at(i, i2 + 1, i3)] + r[f.at(i, i2, i3 - 1)] + r[f.at(i, i2, i3 + 1)];
        y1[i] = r[f.at(i, i2 - 1, i3 - 1)] + r[f.at(i, i2 - 1, i3 + 1)] + r[f.at(i, i2 + 1, i3 - 1)] + r[f.at(i, i2 + 1, i3 + 1)];
      }
      for (size_t c1 = 1; c1 < c.n - 1; ++c1) {
        const size_t i1 = 2 * c1;
        const double y2 = r[f.at(i1, i2 - 1, i3 - 1)] + r[f.at(i1, i2 - 1, i3 + 1)] + r[f.at(i1, i2 + 1, i3 - 1)] + r[f.at(i1, i2 + 1, i3 + 1)];
        const double x2 = r[f.at(i1, i2 - 1, i3)] + r[f.at(i1, i2 + 1, i3)] + r[f.at(i1, i2, i3 - 1)] + r[f.at(i1, i2, i3 + 1)];
        s[c.at(c1, c2, c3)] = 0.5 * r[f.at(i1, i2, i3)] + 0.25 * (r[f.at(i1 - 1, i2, i3)] + r[f.at(i1 + 1, i2, i3)] + x2) +
                              0.125 * (x1[i1 - 1] + x1[i1 + 1] + y2) + 0.0625 * (y1[i1 - 1] + y1[i1 + 1]);
      }
    }
  comm3(s, c);
}

// Trilinear prolongation of the coarse correction z, added to u: coarse planes c3 and c3 + 1
// make fine planes 2 c3 and 2 c3 + 1, which are this member's pair c3 at the fine level.
void Multigrid::interp(const double* z, const Level& c, double* u, const Level& f) {
  const size_t m = c.n;
  double *z1 = work_.data(), *z2 = z1 + m, *z3 = z2 + m;
  for (size_t c3 = f.first / 2; c3 < f.last / 2; ++c3)
    for (size_t c2 = 0; c2 + 1 < m; ++c2) {
      for (size_t c1 = 0; c1 < m; ++c1) {
        z1[c1] = z[c.at(c1, c2 + 1, c3)] + z[c.at(c1, c2, c3)];
        z2[c1] = z[c.at(c1, c2, c3 + 1)] + z[c.at(c1, c2, c3)];
        z3[c1] = z[c.at(c1, c2 + 1, c3 + 1)] + z[c.at(c1, c2, c3 + 1)] + z1[c1];
      }
      const size_t i2 = 2 * c2, i3 = 2 * c3;
      for (size_t c1 = 0; c1 + 1 < m; ++c1) {
        u[f.at(2 * c1, i2, i3)] += z[c.at(c1, c2, c3)];
        u[f.at(2 * c1 + 1, i2, i3)] += 0.5 * (z[c.at(c1 + 1, c2, c3)] + z[c.at(c1, c2, c3)]);
      }
      for (size_t c1 = 0; c1 + 1 < m; ++c1) {
        u[f.at(2 * c1, i2 + 1, i3)] += 0.5 * z1[c1];
        u[f.at(2 * c1 + 1, i2 + 1, i3)] += 0.25 * (z1[c1] + z1[c1 + 1]);
      }
      for (size_t c1 = 0; c1 + 1 < m; ++c1) {
        u[f.at(2 * c1, i2, i3 + 1)] += 0.5 * z2[c1];
        u[f.at(2 * c1 + 1, i2, i3 + 1)] += 0.25 * (z2[c1] + z2[c1 + 1]);
      }
      for (size_t c1 = 0; c1 + 1 < m; ++c1) {
        u[f.at(2 * c1, i2 + 1, i3 + 1)] += 0.25 * z3[c1];
        u[f.at(2 * c1 + 1, i2 + 1, i3 + 1)] += 0.125 * (z3[c1] + z3[c1 + 1]);
      }
    }
}

void Multigrid::v_cycle() {
  for (size_t k = top_; k >= 2; --k) rprj3(levels_[k].r, levels_[k], levels_[k - 1].r, levels_[k - 1]);
  zero(levels_[1].u, levels_[1]);
  psinv(levels_[1].r, levels_[1].u, levels_[1]);
  for (size_t k = 2; k < top_; ++k) {
    Level& l = levels_[k];
    zero(l.u, l);
    interp(levels_[k - 1].u, levels_[k - 1], l.u, l);
    team_.barrier();  // resid reads the neighbours' planes of u
    resid(l.u, l.r, l.r, l);
    psinv(l.r, l.u, l);
  }
  Level& t = levels_[top_];
  interp(levels_[top_ - 1].u, levels_[top_ - 1], t.u, t);
  team_.barrier();
  resid(t.u, v_, t.r, t);
  psinv(t.r, t.u, t);
}

double Multigrid::norm() const {
  const Level& l = levels_[top_];
  double s = 0;
  for (size_t i3 = l.lo; i3 < l.hi; ++i3)
    for (size_t i2 = 1; i2 < l.n - 1; ++i2)
      for (size_t i1 = 1; i1 < l.n - 1; ++i1) s += l.r[l.at(i1, i2, i3)] * l.r[l.at(i1, i2, i3)];
  const double nx = static_cast<double>(l.n - 2);
  return std::sqrt(team_.sum(s) / (nx * nx * nx));
}

// zran3: v is +1 at the ten largest and -1 at the ten smallest of n^3 uniforms drawn in order
// (x fastest), 0 elsewhere. Each member keeps the extremes of its planes; all merge them.
void Multigrid::random_charges() {
  const Level& l = levels_[top_];
  const size_t nx = l.n - 2;
  using Point = std::pair<double, size_t>;  // value, index
  std::vector<Point> high, low;
  auto keep = [](std::vector<Point>& best, Point p, auto better) {
    if (best.size() == 10 && !better(p.first, best.back().first)) return;
    auto it = std::find_if(best.begin(), best.end(), [&](const Point& q) { return better(p.first, q.first); });
    best.insert(it, p);
    if (best.size() > 10) best.pop_back();
  };
  std::vector<double> row(nx);
  for (size_t i3 = l.lo; i3 < l.hi; ++i3) {
    Lcg g(314159265);
    g.skip(nx * nx * (i3 - 1));
    for (size_t i2 = 1; i2 <= nx; ++i2) {
      g.fill(row.data(), static_cast<long>(nx));
      for (size_t i1 = 1; i1 <= nx; ++i1) {
        const Point p{row[i1 - 1], l.at(i1, i2, i3)};
        keep(high, p, std::greater<double>());
        keep(low, p, std::less<double>());
      }
    }
  }
  // Each member's candidates in shared slots: 10 high then 10 low, (value, index) pairs.
  const size_t slot = 40;
  double* all = team_.shared<double>(slot * static_cast<size_t>(team_.size()));
  double* mine = team_.writing(all + slot * static_cast<size_t>(team_.rank()), slot);
  for (size_t i = 0; i < 20; ++i) {
    const std::vector<Point>& src = i < 10 ? high : low;
    const bool have = i % 10 < src.size();
    mine[2 * i] = have ? src[i % 10].first : (i < 10 ? -1.0 : 2.0);  // never chosen
    mine[2 * i + 1] = have ? static_cast<double>(src[i % 10].second) : 0.0;
  }
  team_.barrier();
  const double* seen = team_.reading(all, slot * static_cast<size_t>(team_.size()));
  std::vector<Point> gh, gl;
  for (int m = 0; m < team_.size(); ++m)
    for (size_t i = 0; i < 20; ++i) {
      const Point p{seen[slot * static_cast<size_t>(m) + 2 * i], static_cast<size_t>(seen[slot * static_cast<size_t>(m) + 2 * i + 1])};
      if (i < 10) keep(gh, p, std::greater<double>());
      else keep(gl, p, std::less<double>());
    }
  zero(v_, l);
  const size_t first = l.first * l.plane(), last = l.last * l.plane();
  for (const Point& p : gl)
    if (p.second >= first && p.second < last) v_[p.second] = -1.0;
  for (const Point& p : gh)
    if (p.second >= first && p.second < last) v_[p.second] = +1.0;
  comm3(v_, l);
}

size_t grid_bytes(size_t log2n) {
  const size_t n = 2 + (size_t{1} << log2n);
  return n * n * n * sizeof(double) + 4096;
}

}  // namespace

size_t mg_shared_bytes(char cls, int members) {
  const MgClass& c = mg_class(cls);
  size_t b = grid_bytes(static_cast<size_t>(c.log2n));  // v
  for (int k = 1; k <= c.log2n; ++k) b += 2 * grid_bytes(static_cast<size_t>(k));
  return b + static_cast<size_t>(members) * 40 * sizeof(double) + 4096;
}

Result run_mg(Team& team, char cls) {
  const MgClass& c = mg_class(cls);
  Multigrid mg(team, c);
  mg.init();
  // One untimed V-cycle (as the reference), then the problem again from the start.
  mg.resid_top();
  mg.v_cycle();
  mg.resid_top();
  mg.init();
  TeamTimer timer(team);
  mg.resid_top();
  for (int it = 1; it <= c.nit; ++it) {
    mg.v_cycle();
    mg.resid_top();
  }
  const double rnm2 = mg.norm();
  Result r;
  r.seconds = timer.stop();
  const size_t n = size_t{1} << c.log2n;
  r.kernel = "MG";
  r.cls = cls;
  r.size = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
  r.iterations = c.nit;
  r.operation = "floating point";
  r.mops = 58.0 * c.nit * static_cast<double>(n * n * n) * 1e-6 / r.seconds;
  r.verified = check_relative("rnm2", rnm2, c.rnm2, 1e-8, r.details);
  return r;
}

}  // namespace loom::nas
