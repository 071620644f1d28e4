/* A program with `omp flush` (GCC: `lock or $0, (%rsp)`): at 2 processes or more the layer says
 * at start that flushes publish nothing across processes (omp/layer.cpp); the flushes themselves
 * still run. */
#include <omp.h>
#include <stdio.h>

int seen[64];

int main(void) {
#pragma omp parallel
  {
    seen[omp_get_thread_num() % 64] = 1;
#pragma omp flush
  }
  int n = 0;
  for (int i = 0; i < 64; i++) n += seen[i];
  printf("flush: %d threads ran\n", n);
  return n == omp_get_max_threads() || n == 64 ? 0 : 1;
}
