/* Threads that wait for each other by flags and `omp flush` (GCC: `lock or $0, (%rsp)`), as NPB
 * LU's pipeline does, rather than by barriers or locks: a value goes round the ring of threads
 * ROUNDS times, each thread waiting for its left neighbour's flag, adding 1 and raising its own.
 * Then a flag raised inside `critical` (a lock's release, which no flush pairs with) that the
 * last thread polls with flushes, as LU's threads poll flags their neighbours set without one.
 * On the layer a flush is a release and an acquire across processes; were it only a fence within
 * a process, a thread of another process would wait forever for a flag it never sees change. */
#include <omp.h>
#include <stdio.h>

#define ROUNDS 20
#define MAX_THREADS 64

int flag[MAX_THREADS];     /* the round whose value a thread has written */
long value[MAX_THREADS];   /* the value it passed on */
int raised;                /* set in a critical section */
int noticed;               /* by the thread that saw it */

static void wait_for(int who, int round) {
  int seen;
  do {
#pragma omp flush
    seen = flag[who];
  } while (seen < round);
#pragma omp flush
}

int main(void) {
  int threads = 0;
#pragma omp parallel
  {
    const int me = omp_get_thread_num(), n = omp_get_num_threads();
#pragma omp single
    threads = n;
    if (n <= MAX_THREADS) {
      for (int r = 1; r <= ROUNDS; r++) {
        long in = 0;
        if (me > 0) {
          wait_for(me - 1, r);
          in = value[me - 1];
        } else if (r > 1) {
          wait_for(n - 1, r - 1);
          in = value[n - 1];
        }
        value[me] = in + 1;
#pragma omp flush
        flag[me] = r;
#pragma omp flush
      }
    }
  }
#pragma omp parallel
  {
    const int me = omp_get_thread_num();
    if (me == 0) {
#pragma omp critical
      raised = 1;
    } else if (me == omp_get_num_threads() - 1) {
      int seen;
      do {
#pragma omp flush
        seen = raised;
      } while (!seen);
      noticed = 1;
    }
  }
  if (threads > 1 && !noticed) {
    printf("flush: the flag raised in critical was not noticed\n");
    return 1;
  }
  if (threads > MAX_THREADS) {
    printf("flush: more than %d threads\n", MAX_THREADS);
    return 1;
  }
  const long want = (long)ROUNDS * threads;
  if (value[threads - 1] != want) {
    printf("flush: the last thread passed on %ld, not %ld\n", value[threads - 1], want);
    return 1;
  }
  printf("flush: ok, %d rounds through %d threads\n", ROUNDS, threads);
  return 0;
}
