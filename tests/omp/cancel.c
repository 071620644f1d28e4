/* `cancel` and `cancellation point` with cancellation off (OMP_CANCELLATION unset: OpenMP's
 * default): every construct runs to its end, as the specification says, so the sums are exact.
 * Run with OMP_CANCELLATION=true the layer refuses to start, naming the setting. */
#include <omp.h>
#include <stdio.h>

#define N 1000

long hits[N];

int main(void) {
  long ran = 0;
  if (omp_get_cancellation()) {
    printf("cancel: cancellation reported on\n");
    return 1;
  }
#pragma omp parallel reduction(+ : ran)
  {
#pragma omp for
    for (int i = 0; i < N; i++) {
      hits[i] += 1;
      ran += 1;
#pragma omp cancel for if (i == N / 2)
#pragma omp cancellation point for
    }
  }
  int in_region = 0;
#pragma omp parallel reduction(+ : in_region)
  {
    in_region += 1;
#pragma omp cancel parallel if (omp_get_thread_num() == 0)
#pragma omp cancellation point parallel
#pragma omp barrier
  }
  for (int i = 0; i < N; i++)
    if (hits[i] != 1) {
      printf("cancel: iteration %d ran %ld times\n", i, hits[i]);
      return 1;
    }
  if (ran != N || in_region != omp_get_max_threads()) {
    printf("cancel: %ld iterations and %d threads ran (want %d and %d)\n", ran, in_region, N, omp_get_max_threads());
    return 1;
  }
  printf("cancel: ok, every construct ran to its end\n");
  return 0;
}
