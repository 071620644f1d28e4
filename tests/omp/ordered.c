/* `ordered` sections in loops of every schedule: each section appends its iteration to a shared
 * list and adds it to a running sum, so the list must come out in iteration order and each
 * prefix sum must be the one before plus the iteration — on a DSM that needs the turns to pass
 * in iteration order and each section to see the writes of the section before (another
 * process's, for a chunk there). Also a loop whose sections run on some iterations only, and
 * an unsigned long long loop. Exact results, checked by the program. */
#include <omp.h>
#include <stdio.h>

#define N 200

int order[N];       /* iterations in the order their sections ran */
long prefix[N];     /* the running sum when each ran */
int count;
long sum;

static void reset(void) {
  count = 0;
  sum = 0;
  for (int i = 0; i < N; i++) order[i] = -1, prefix[i] = -1;
}

static void section(int i) {
  order[count++] = i;
  sum += i;
  prefix[i] = sum;
}

/* every: a section on every iteration (else on multiples of 3 only). */
static int check(const char* what, int every) {
  int want = 0;
  long s = 0;
  for (int i = 0; i < N; i++) {
    if (!every && i % 3 != 0) continue;
    s += i;
    if (order[want] != i || prefix[i] != s) {
      printf("ordered %s: position %d holds %d (want %d), prefix %ld (want %ld)\n", what, want, order[want], i,
             prefix[i], s);
      return 1;
    }
    want++;
  }
  if (count != want) {
    printf("ordered %s: %d sections ran, want %d\n", what, count, want);
    return 1;
  }
  return 0;
}

#define PRAGMA(x) _Pragma(#x)
/* A loop of `type` over N with a section on every iteration, under schedule(...); checked. */
#define ORDERED_LOOP(type, name, ...)                      \
  do {                                                     \
    reset();                                               \
    PRAGMA(omp parallel for ordered schedule(__VA_ARGS__)) \
    for (type i = 0; i < (type)N; i++) {                   \
      PRAGMA(omp ordered)                                  \
      section((int)i);                                     \
    }                                                      \
    bad |= check(name, 1);                                 \
  } while (0)

int main(void) {
  int bad = 0;
  ORDERED_LOOP(int, "static", static);
  ORDERED_LOOP(int, "static,3", static, 3);
  ORDERED_LOOP(int, "dynamic,2", dynamic, 2);
  ORDERED_LOOP(int, "guided", guided);
  ORDERED_LOOP(int, "runtime", runtime);
  ORDERED_LOOP(unsigned long long, "unsigned long long", dynamic, 4);
  reset();
#pragma omp parallel for ordered schedule(dynamic, 5)
  for (int i = 0; i < N; i++) {
    if (i % 3 == 0) {
#pragma omp ordered
      section(i);
    }
  }
  bad |= check("some iterations", 0);
  if (bad) return 1;
  printf("ordered: ok, %d threads\n", omp_get_max_threads());
  return 0;
}
