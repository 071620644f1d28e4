// Reductions and atomics across processes, each result checked exactly: GCC carries out scalar
// reductions and `omp atomic` with locked instructions on the shared variable (the layer replaces
// them, omp/inline_atomics.hpp), array reductions under GOMP_atomic_start. Compiled with only
// -fopenmp; prints "reduce: ok" when every check holds.
#include <omp.h>
#include <stdio.h>

#define N 20000
#define M 4096

double values[N];
long isum;
double dsum;
double dmax = -1.0;
int imin = 1 << 30;
unsigned and_bits = ~0u, or_bits, xor_bits;
double product = 1.0;
int hist[16];
int hist_critical[16];
unsigned char bytes[64];
int ticket;
unsigned char seen[M];
long array_sum[8];
int lowest = 1 << 30;
__thread long per_thread;

static int failures;

static void check(const char* what, double got, double want) {
  if (got != want) {
    printf("reduce: %s is %.17g, not %.17g\n", what, got, want);
    ++failures;
  }
}

int main(void) {
  for (int i = 0; i < N; ++i) values[i] = 0.5 * i;
  long local = 0;  // on rank 0's master stack, which is shared
#pragma omp parallel for reduction(+ : isum, local)
  for (int i = 0; i < N; ++i) isum += i, local += 2 * i;
#pragma omp parallel for reduction(+ : dsum) reduction(max : dmax) reduction(min : imin)
  for (int i = 0; i < N; ++i) {
    dsum += values[i];
    if (values[i] > dmax) dmax = values[i];
    if (N - i < imin) imin = N - i;
  }
#pragma omp parallel for reduction(& : and_bits) reduction(| : or_bits) reduction(^ : xor_bits) reduction(* : product)
  for (int i = 0; i < 20; ++i) {
    and_bits &= ~(1u << i);
    or_bits |= 1u << i;
    xor_bits ^= 1u << (i % 10);
    product *= 2.0;
  }
#pragma omp parallel for
  for (int i = 0; i < M; ++i) {
#pragma omp atomic
    hist[i % 16]++;
#pragma omp atomic
    bytes[i % 64] += 1;
    int mine;
#pragma omp atomic capture
    mine = ticket++;
    if (mine >= 0 && mine < M) seen[mine] = 1;
    ++per_thread;
#pragma omp critical
    hist_critical[i % 16] += 2;
  }
#pragma omp parallel for reduction(+ : array_sum[:8])
  for (int i = 0; i < N; ++i) array_sum[i % 8] += 1;
#pragma omp parallel
  {
    const int me = omp_get_thread_num() + 100;
#pragma omp atomic compare
    lowest = me < lowest ? me : lowest;
  }
  long threads_count = 0;
#pragma omp parallel reduction(+ : threads_count)
  threads_count += per_thread;

  check("isum", isum, (double)N * (N - 1) / 2);
  check("local", local, (double)N * (N - 1));
  check("dsum", dsum, 0.5 * N * (N - 1) / 2);
  check("dmax", dmax, 0.5 * (N - 1));
  check("imin", imin, 1);
  check("and", and_bits, ~0u & ~((1u << 20) - 1));
  check("or", or_bits, (1u << 20) - 1);
  check("xor", xor_bits, 0);
  check("product", product, 1 << 20);
  for (int k = 0; k < 16; ++k) check("hist", hist[k], M / 16), check("hist_critical", hist_critical[k], 2 * M / 16);
  for (int k = 0; k < 64; ++k) check("bytes", bytes[k], M / 64);
  check("ticket", ticket, M);
  int unseen = 0;
  for (int k = 0; k < M; ++k) unseen += !seen[k];
  check("tickets not taken", unseen, 0);
  for (int k = 0; k < 8; ++k) check("array_sum", array_sum[k], N / 8);
  check("lowest", lowest, 100);
  check("per-thread counts", threads_count, M);
  if (failures != 0) return 1;
  printf("reduce: ok (%d threads)\n", omp_get_max_threads());
  return 0;
}
