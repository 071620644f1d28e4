// C++ containers on the shared heap: a std::vector the master builds is filled by every thread
// of every process, then summed by the master; each thread's std::vector, made inside the
// region, is handed over through a global array of pointers. Prints "heap-cxx: ok".
#include <omp.h>

#include <cstdio>
#include <memory>
#include <numeric>
#include <vector>

std::vector<long>* parts[1024];

int main() {
  const long n = 200000;
  std::vector<long> v(n);
#pragma omp parallel for
  for (long i = 0; i < n; ++i) v[i] = 3 * i;
  const long sum = std::accumulate(v.begin(), v.end(), 0L);
  const int threads = omp_get_max_threads();
#pragma omp parallel
  {
    const int t = omp_get_thread_num();
    auto* mine = new std::vector<long>();
    for (int k = 0; k <= t; ++k) mine->push_back(t);
    parts[t] = mine;
  }
  long wrong = 0;
  for (int t = 0; t < threads; ++t) {
    wrong += static_cast<long>(parts[t]->size()) != t + 1;
    for (long x : *parts[t]) wrong += x != t;
    delete parts[t];
  }
  if (sum != 3 * n * (n - 1) / 2 || wrong != 0) {
    std::printf("heap-cxx: sum %ld (want %ld), %ld values wrong\n", sum, 3 * n * (n - 1) / 2, wrong);
    return 1;
  }
  std::printf("heap-cxx: ok (%d threads)\n", threads);
  return 0;
}
