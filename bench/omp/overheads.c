// The OpenMP layer's construct overheads, in the manner of the EPCC syncbench: each construct
// many times in one region (or as many regions), the time per construct in microseconds. The
// same source runs on libgomp (omp_overheads_gomp, OMP_NUM_THREADS=T) and on the layer
// (loomrun -n P --threads T omp_overheads). Prints CSV: runtime,threads,construct,us.
// Usage: omp_overheads [REPS] [LABEL]
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static long counter;
static double sink;
static omp_lock_t lock;
static long next_in_order;

static double per_op(double t0, double t1, int reps) { return (t1 - t0) * 1e6 / reps; }

// Orphaned constructs, run by every thread of the region that calls them.
static void one_barrier(void) {
#pragma omp barrier
}
static void one_static_loop(void) {
  const int n = omp_get_num_threads();
#pragma omp for schedule(static)
  for (int i = 0; i < n; ++i) sink += 0;
}

// Microseconds per construct, the construct `reps` times in one region.
static double in_region(void (*construct)(void), int reps) {
  double t0 = 0, t1 = 0;
#pragma omp parallel
  {
#pragma omp single
    t0 = omp_get_wtime();
    for (int r = 0; r < reps; ++r) construct();
#pragma omp single
    t1 = omp_get_wtime();
  }
  return per_op(t0, t1, reps);
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 2000;
  const char* label = argc > 2 ? argv[2] : "omp";
  const int threads = omp_get_max_threads();
  if (reps <= 0) {
    fprintf(stderr, "omp_overheads: REPS must be positive\n");
    return 2;
  }
  double t0, t1;
#pragma omp parallel
  sink += 0;  // the first region starts the team
  t0 = omp_get_wtime();
  for (int r = 0; r < reps; ++r) {
#pragma omp parallel
    if (omp_get_thread_num() < 0) sink += 1;  // never true; the region is not empty
  }
  t1 = omp_get_wtime();
  printf("%s,%d,parallel,%.3f\n", label, threads, per_op(t0, t1, reps));
  printf("%s,%d,barrier,%.3f\n", label, threads, in_region(one_barrier, reps));
  printf("%s,%d,for-static,%.3f\n", label, threads, in_region(one_static_loop, reps));
  t0 = omp_get_wtime();
  for (int r = 0; r < reps / 10 + 1; ++r) {
    long s = 0;
#pragma omp parallel reduction(+ : s)
    s += 1;
    if (s != threads) {
      fprintf(stderr, "omp_overheads: a reduction gave %ld, not %d\n", s, threads);
      return 1;
    }
  }
  t1 = omp_get_wtime();
  printf("%s,%d,parallel-reduction,%.3f\n", label, threads, per_op(t0, t1, reps / 10 + 1));
  const int each = reps / 10 + 1;
  t0 = omp_get_wtime();
#pragma omp parallel
  for (int r = 0; r < each; ++r) {
#pragma omp atomic
    counter++;
  }
  t1 = omp_get_wtime();
  if (counter != (long)each * threads) {
    fprintf(stderr, "omp_overheads: %ld atomic increments, not %ld\n", counter, (long)each * threads);
    return 1;
  }
  printf("%s,%d,atomic,%.3f\n", label, threads, per_op(t0, t1, each));
  t0 = omp_get_wtime();
#pragma omp parallel
  for (int r = 0; r < each; ++r) {
#pragma omp critical
    counter--;
  }
  t1 = omp_get_wtime();
  if (counter != 0) {
    fprintf(stderr, "omp_overheads: %ld left after the critical decrements\n", counter);
    return 1;
  }
  printf("%s,%d,critical,%.3f\n", label, threads, per_op(t0, t1, each));
  omp_init_lock(&lock);
  t0 = omp_get_wtime();
#pragma omp parallel
  for (int r = 0; r < each; ++r) {
    omp_set_lock(&lock);
    counter++;
    omp_unset_lock(&lock);
  }
  t1 = omp_get_wtime();
  omp_destroy_lock(&lock);
  if (counter != (long)each * threads) {
    fprintf(stderr, "omp_overheads: %ld increments under a lock, not %ld\n", counter, (long)each * threads);
    return 1;
  }
  printf("%s,%d,lock,%.3f\n", label, threads, per_op(t0, t1, each));
  t0 = omp_get_wtime();
#pragma omp parallel
  for (int r = 0; r < each; ++r) {
#pragma omp flush
  }
  t1 = omp_get_wtime();
  printf("%s,%d,flush,%.3f\n", label, threads, per_op(t0, t1, each));
  // An ordered section per iteration, one iteration a chunk: the turn goes round the threads.
  const int iterations = each * threads;
  t0 = omp_get_wtime();
#pragma omp parallel for ordered schedule(static, 1)
  for (int i = 0; i < iterations; ++i) {
#pragma omp ordered
    if (next_in_order++ != i) counter = -1;
  }
  t1 = omp_get_wtime();
  if (next_in_order != iterations || counter != (long)each * threads) {
    fprintf(stderr, "omp_overheads: ordered sections ran out of order\n");
    return 1;
  }
  printf("%s,%d,ordered,%.3f\n", label, threads, per_op(t0, t1, iterations));
  return 0;
}
