// The heap shared across processes: memory the master allocates in serial code is read and
// written by every thread; blocks threads allocate inside a region are published through a
// global array and read (and freed) by the master; realloc keeps the contents, calloc zeros,
// posix_memalign and aligned_alloc align; allocation churn inside a region. Compiled with only
// -fopenmp; prints "heap: ok" when every check holds.
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100000
#define PER_THREAD 1000

double* grid;
int* per_thread[1024];
static int failures;

static void check(const char* what, long got, long want) {
  if (got != want) {
    printf("heap: %s is %ld, not %ld\n", what, got, want);
    ++failures;
  }
}

int main(void) {
  const int threads = omp_get_max_threads();
  grid = malloc(N * sizeof(double));
  if (grid == NULL) return 1;
  for (int i = 0; i < N; ++i) grid[i] = i;
  double sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < N; ++i) {
    grid[i] *= 2;
    sum += grid[i];
  }
  check("sum of the doubled grid", (long)sum, (long)N * (N - 1));
  long wrong = 0;
  for (int i = 0; i < N; ++i) wrong += grid[i] != 2.0 * i;
  check("grid points the master sees wrong", wrong, 0);

#pragma omp parallel
  {
    const int t = omp_get_thread_num();
    int* p = malloc(PER_THREAD * sizeof(int));
    for (int k = 0; k < PER_THREAD; ++k) p[k] = t * PER_THREAD + k;
    per_thread[t] = p;
  }
  wrong = 0;
  for (int t = 0; t < threads; ++t) {
    for (int k = 0; k < PER_THREAD; ++k) wrong += per_thread[t][k] != t * PER_THREAD + k;
    free(per_thread[t]);  // most were allocated by other processes
  }
  check("values of the threads' blocks the master sees wrong", wrong, 0);

  char* s = malloc(16);
  strcpy(s, "loom heap");
  s = realloc(s, 1 << 20);
  s[(1 << 20) - 1] = 'x';
  long bad_strings = 0;
#pragma omp parallel reduction(+ : bad_strings)
  bad_strings += strcmp(s, "loom heap") != 0 || s[(1 << 20) - 1] != 'x';
  check("threads that read the reallocated string wrong", bad_strings, 0);
  free(s);

  long* zeros = calloc(4096, sizeof(long));
  long nonzero = 0;
#pragma omp parallel for reduction(+ : nonzero)
  for (int i = 0; i < 4096; ++i) nonzero += zeros[i] != 0;
  check("calloc'd words not zero", nonzero, 0);
  free(zeros);

  void* page = NULL;
  check("posix_memalign", posix_memalign(&page, 4096, 8192), 0);
  check("posix_memalign's alignment", (long)((uintptr_t)page % 4096), 0);
  void* line = aligned_alloc(256, 1024);
  check("aligned_alloc's alignment", (long)((uintptr_t)line % 256), 0);
  free(page);
  free(line);

  long churn_wrong = 0;
#pragma omp parallel for reduction(+ : churn_wrong) schedule(dynamic, 16)
  for (int i = 0; i < 4000; ++i) {
    const size_t n = (size_t)(i % 700) + 1;
    unsigned char* p = malloc(n);
    memset(p, i & 0xff, n);
    churn_wrong += p[n - 1] != (i & 0xff);
    free(p);
  }
  check("bytes of blocks allocated in the region wrong", churn_wrong, 0);

  free(grid);
  if (failures != 0) return 1;
  printf("heap: ok (%d threads)\n", threads);
  return 0;
}
