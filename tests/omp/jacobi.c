/* A plain OpenMP Jacobi relaxation on global grids, checked against the same sweeps run
 * serially in the same program (each point's update does not depend on the schedule, so the
 * grids must match exactly). Unmodified: only -fopenmp and the layer's link line. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#define N 258
#define SWEEPS 60

double u[N][N], unew[N][N], serial[N][N];

static void init(double g[N][N]) {
  memset(g, 0, sizeof(double) * N * N);
  for (int i = 0; i < N; i++) g[i][0] = g[0][i] = 1.0;  /* two hot edges */
}

int main(void) {
  init(serial);
  init(unew);
  for (int s = 0; s < SWEEPS; s++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        unew[i][j] = 0.25 * (serial[i - 1][j] + serial[i + 1][j] + serial[i][j - 1] + serial[i][j + 1]);
    memcpy(serial, unew, sizeof serial);
  }
  init(u);
  init(unew);
  const double t0 = omp_get_wtime();
  for (int s = 0; s < SWEEPS; s++) {
#pragma omp parallel for schedule(static)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        unew[i][j] = 0.25 * (u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1]);
#pragma omp parallel for schedule(static)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++) u[i][j] = unew[i][j];
  }
  const double t1 = omp_get_wtime();
  long differ = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      if (u[i][j] != serial[i][j]) differ++;
  if (differ != 0) {
    printf("jacobi FAILED: %ld points differ from the serial sweeps\n", differ);
    return 1;
  }
  printf("jacobi OK: %d threads, %d sweeps of %dx%d in %.3f s, u[1][1] = %.6f\n", omp_get_max_threads(), SWEEPS, N, N,
         t1 - t0, u[1][1]);
  return 0;
}
