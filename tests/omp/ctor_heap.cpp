// Global objects whose constructors allocate, and a global a constructor sets to a value of its
// own process: the constructors run in every process before main, and the program runs with one
// copy of its globals — rank 0's, pointing into the shared heap. Every thread of every process
// writes its slot of a table a constructor allocated and reads a vector a constructor filled;
// the master then sees every write. Prints "ctor-heap: ok".
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

constexpr int kSlots = 1024;

std::vector<long> g_filled(5000, 7);
std::string g_text(300, 'x');  // longer than the short-string buffer: on the heap
long* g_table = static_cast<long*>(std::calloc(kSlots, sizeof(long)));
const long g_pid = static_cast<long>(getpid());  // each process's own, before the globals are shared
long g_seen_pid[kSlots];

int main() {
  const int threads = omp_get_max_threads();
  if (g_table == nullptr || threads > kSlots) {
    std::printf("ctor-heap: no table, or more than %d threads\n", kSlots);
    return 1;
  }
  long bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
    const int t = omp_get_thread_num();
    long sum = 0;
    for (long x : g_filled) sum += x;
    bad += sum != 7L * 5000;
    bad += g_text.size() != 300 || g_text[299] != 'x';
    g_table[t] = 1000 + t;
    g_seen_pid[t] = g_pid;
  }
  for (int t = 0; t < threads; ++t) {
    if (g_table[t] != 1000 + t) ++bad, std::printf("ctor-heap: slot %d holds %ld\n", t, g_table[t]);
    if (g_seen_pid[t] != static_cast<long>(getpid())) ++bad, std::printf("ctor-heap: thread %d saw pid %ld\n", t, g_seen_pid[t]);
  }
  if (bad != 0) return 1;
  std::printf("ctor-heap: ok, %d threads\n", threads);
  return 0;
}
