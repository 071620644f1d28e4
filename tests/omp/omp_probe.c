/* An unmodified OpenMP program (only -fopenmp and the layer's link line) that checks what it
 * sees: every thread of every process runs, loops of every schedule hand out each iteration
 * once, critical sections and single exclude across processes, barriers, a nested region of one
 * thread, tasks, sections. Globals and the variables of main's frames are shared as on one machine. */
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N 10000
#define MAXT 64

int ran[MAXT];
int hits[N];
int hits_down[N];
long crit_count;
long named_count;
int singles;
int phase[MAXT];
int phase_bad;
int section_count[8];

static int fail(const char* what, long got, long want) {
  printf("omp-probe FAILED: %s: %ld, expected %ld\n", what, got, want);
  return 1;
}

/* A program's own SIGSEGV handler (as language runtimes install) must only see faults that are
 * not on shared memory (not installed with PROBE_SEGV_HANDLER=0: the TSan build, where
 * TSan's own interceptor sits in front of the layer's). */
static void on_segv(int sig) {
  (void)sig;
  static const char msg[] = "omp-probe FAILED: the program's SIGSEGV handler ran\n";
  ssize_t r = write(1, msg, sizeof msg - 1);
  (void)r;
  _exit(3);
}

int main(void) {
  const char* with_handler = getenv("PROBE_SEGV_HANDLER");
  if (with_handler == NULL || with_handler[0] != '0') signal(SIGSEGV, on_segv);
  int threads = 0;
  const int expected = omp_get_max_threads();
  if (expected > MAXT) return fail("threads over the probe's limit", expected, MAXT);
#pragma omp parallel
  {
    ran[omp_get_thread_num()] = omp_get_thread_num() + 1;
#pragma omp single
    threads = omp_get_num_threads();
  }
  if (threads != expected) return fail("team size", threads, expected);
  for (int t = 0; t < threads; t++)
    if (ran[t] != t + 1) return fail("a thread's mark", ran[t], t + 1);

#pragma omp parallel for schedule(dynamic, 7)
  for (int i = 0; i < N; i++) hits[i] += 1;
#pragma omp parallel for schedule(guided)
  for (int i = 0; i < N; i++) hits[i] += 1;
#pragma omp parallel for schedule(static, 3)
  for (int i = 0; i < N; i++) hits[i] += 1;
#pragma omp parallel for schedule(runtime)
  for (int i = 0; i < N; i++) hits[i] += 1;
#pragma omp parallel
  {
#pragma omp for schedule(dynamic) nowait
    for (int i = 0; i < N; i++) hits[i] += 1;
#pragma omp for schedule(static)
    for (int i = N - 1; i >= 0; i -= 2) hits_down[i] += 1; /* other data: the loop above ran nowait */
  }
  for (int i = 0; i < N; i++) {
    if (hits[i] != 5) return fail("an iteration's count", hits[i], 5);
    if (hits_down[i] != (i % 2 == 1)) return fail("a downward iteration's count", hits_down[i], i % 2 == 1);
  }

#pragma omp parallel
  for (int k = 0; k < 100; k++) {
#pragma omp critical
    crit_count += 1;
#pragma omp critical(other)
    named_count += 2;
  }
  if (crit_count != 100L * threads) return fail("critical count", crit_count, 100L * threads);
  if (named_count != 200L * threads) return fail("named critical count", named_count, 200L * threads);

#pragma omp parallel
  for (int k = 0; k < 50; k++) {
#pragma omp single
    singles++;
  }
  if (singles != 50) return fail("singles", singles, 50);

#pragma omp parallel
  {
    const int me = omp_get_thread_num();
    for (int r = 1; r <= 3; r++) {
      phase[me] = r;
#pragma omp barrier
      for (int t = 0; t < omp_get_num_threads(); t++)
        if (phase[t] != r) {
#pragma omp critical
          phase_bad++;
        }
#pragma omp barrier
    }
  }
  if (phase_bad != 0) return fail("phases seen wrong", phase_bad, 0);

  int inner_bad = 0;
#pragma omp parallel
  {
#pragma omp parallel
    {
      if (omp_get_num_threads() != 1 || omp_get_thread_num() != 0) {
#pragma omp critical
        inner_bad++;
      }
    }
  }
  if (inner_bad != 0) return fail("nested regions of more than one thread", inner_bad, 0);

  long task_sum = 0;
#pragma omp parallel
#pragma omp single
  {
    for (int i = 0; i < 10; i++) {
#pragma omp task shared(task_sum) firstprivate(i)
      {
#pragma omp critical
        task_sum += i;
      }
    }
#pragma omp taskwait
  }
  if (task_sum != 45) return fail("task sum", task_sum, 45);

  /* sections: each runs once, on some thread of the job (a second run would double a count) */
#pragma omp parallel
  {
#pragma omp sections
    {
#pragma omp section
      section_count[0] += 1;
#pragma omp section
      section_count[1] += 1;
#pragma omp section
      section_count[2] += 1;
    }
#pragma omp sections nowait
    {
#pragma omp section
      section_count[3] += 1;
#pragma omp section
      section_count[4] += 1;
    }
  }
#pragma omp parallel sections
  {
#pragma omp section
    section_count[5] += 1;
#pragma omp section
    section_count[6] += 1;
#pragma omp section
    section_count[7] += 1;
  }
  for (int k = 0; k < 8; k++)
    if (section_count[k] != 1) return fail("a section's runs", section_count[k], 1);

  printf("omp-probe OK: %d threads\n", threads);
  return 0;
}
