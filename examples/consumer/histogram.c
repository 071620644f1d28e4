// An ordinary OpenMP program, run as many processes on Loom's OpenMP layer: a histogram of
// pseudo-random values on the heap, counted with an array reduction, its largest bin found
// with a max reduction, and a census of the threads taken under `critical`.
//   gcc -O2 -fopenmp histogram.c $(pkg-config --libs loom-omp) -o histogram
//   loomrun -n 2 --threads 2 ./histogram
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define BINS 64

int main(void) {
  const long n = 1 << 20;
  unsigned* values = malloc(n * sizeof *values);  // on the shared heap: every process reads it
  if (values == NULL) return 1;
  unsigned x = 12345;
  for (long i = 0; i < n; ++i) values[i] = x = x * 1103515245u + 12345u;
  long bins[BINS] = {0};
#pragma omp parallel for reduction(+ : bins[:BINS])
  for (long i = 0; i < n; ++i) bins[(values[i] >> 16) % BINS] += 1;
  long largest = 0, total = 0;
#pragma omp parallel for reduction(max : largest) reduction(+ : total)
  for (int b = 0; b < BINS; ++b) {
    if (bins[b] > largest) largest = bins[b];
    total += bins[b];
  }
  int census = 0;
#pragma omp parallel
  {
#pragma omp critical
    census += 1;
  }
  free(values);
  if (total != n || census != omp_get_max_threads()) {
    printf("histogram: %ld values counted of %ld, %d threads of %d\n", total, n, census, omp_get_max_threads());
    return 1;
  }
  printf("histogram: %ld values in %d bins, the largest holds %ld; %d threads\n", total, BINS, largest, census);
  return 0;
}
