/* OpenMP locks and named critical sections as a program uses them: an array of locks, two held
 * at once (always the lower index first), each guarding its own counter; named critical sections
 * nested in one another; omp_test_lock; nestable locks taken again by their holder. Every lock
 * or name is its own lock: two of them must never be one lock underneath (a thread holding one
 * would wait for itself taking the other). Exact counts, checked by the program. */
#include <omp.h>
#include <stdio.h>

#define LOCKS 48
#define ROUNDS 40

omp_lock_t lock[LOCKS];
long counter[LOCKS];
long outer_count, inner_count, tested, nested_count;
omp_nest_lock_t nest;

int main(void) {
  for (int i = 0; i < LOCKS; i++) omp_init_lock(&lock[i]);
  omp_init_nest_lock(&nest);
  int threads = omp_get_max_threads();
#pragma omp parallel
  {
    const int me = omp_get_thread_num();
    for (int r = 0; r < ROUNDS; r++) {
      const int a = (me * 7 + r * 5) % LOCKS, b = (a + 1 + (r + me) % (LOCKS - 1)) % LOCKS;
      const int lo = a < b ? a : b, hi = a < b ? b : a;
      omp_set_lock(&lock[lo]);
      omp_set_lock(&lock[hi]);
      counter[lo] += 1;
      counter[hi] += 1;
      omp_unset_lock(&lock[hi]);
      omp_unset_lock(&lock[lo]);
#pragma omp critical(outer)
      {
        outer_count += 1;
#pragma omp critical(inner)
        inner_count += 1;
      }
      while (!omp_test_lock(&lock[0])) {
      }
      tested += 1;
      omp_unset_lock(&lock[0]);
      omp_set_nest_lock(&nest);
      omp_set_nest_lock(&nest);
      if (omp_test_nest_lock(&nest) != 3) nested_count -= 1000000;
      nested_count += 1;
      omp_unset_nest_lock(&nest);
      omp_unset_nest_lock(&nest);
      omp_unset_nest_lock(&nest);
    }
  }
  long total = 0;
  for (int i = 0; i < LOCKS; i++) total += counter[i];
  const long want = (long)threads * ROUNDS;
  if (total != 2 * want || outer_count != want || inner_count != want || tested != want || nested_count != want) {
    printf("locks: counters %ld (want %ld), critical %ld/%ld, tested %ld, nested %ld (want %ld each)\n", total, 2 * want,
           outer_count, inner_count, tested, nested_count, want);
    return 1;
  }
  for (int i = 0; i < LOCKS; i++) omp_destroy_lock(&lock[i]);
  omp_destroy_nest_lock(&nest);
  printf("locks: ok, %d threads\n", threads);
  return 0;
}
