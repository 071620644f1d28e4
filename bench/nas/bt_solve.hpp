#pragma once
// BT's line solves: along one grid line, the 5x5 block tri-diagonal system the ADI factor of
// one direction makes (NPB's x_solve, y_solve, z_solve), solved in place on the line's
// right-hand sides by block Gaussian elimination without pivoting and back substitution.
#include <cstddef>
#include <vector>

namespace loom::nas::bt {

// A 5x5 block, stored as NPB stores them: v[col][row].
struct Block {
  double v[5][5];
};

enum class Axis { X, Y, Z };

// The constants a line solve uses (from NPB's set_constants).
struct SolveConstants {
  double c1, c2, c3, c4, c3c4, c1345, con43, dt;
  double t1[3], t2[3];  // tx1, ty1, tz1 and tx2, ty2, tz2
  double d[3][5];       // dx1..dx5, dy1..dy5, dz1..dz5
};

// One line of points p = 0..last: the solution u and right-hand side r at u + p*u_step and
// r + p*r_step (5 doubles each), and the point's reciprocal density, qs and square at
// rho[p*s_step] (X and Y use rho; Z takes 1/u[0] as NPB does).
struct Line {
  const double* u;
  std::ptrdiff_t u_step;
  double* r;
  std::ptrdiff_t r_step;
  const double* rho;
  const double* qs;
  const double* square;
  std::ptrdiff_t s_step;
  size_t last;
};

// The scratch of one member: the jacobians and the block rows of a line of up to `points`.
class LineSolver {
 public:
  LineSolver(const SolveConstants& k, size_t points) : k_(k), fjac_(points), njac_(points), lhs_(points) {}
  void solve(Axis axis, const Line& line);

 private:
  void jacobians(Axis axis, const Line& line);
  void form_lhs(Axis axis, size_t last);

  const SolveConstants& k_;
  std::vector<Block> fjac_, njac_;
  struct Row {
    Block aa, bb, cc;
  };
  std::vector<Row> lhs_;
};

}  // namespace loom::nas::bt
