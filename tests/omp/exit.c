// exit() inside a parallel region ends the job with its status at once (omp/start.cpp): the
// thread numbered argv[1] (the last one when absent) calls exit(3) after a barrier while the
// others wait in the next one. Run by ctest, which expects loomrun to report status 3.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  int quitter = argc > 1 ? atoi(argv[1]) : -1;
#pragma omp parallel
  {
    const int me = omp_get_thread_num();
    const int last = omp_get_num_threads() - 1;
#pragma omp barrier
    if (me == (quitter < 0 ? last : quitter)) {
      printf("exit: thread %d of %d calls exit(3)\n", me, last + 1);
      exit(3);
    }
#pragma omp barrier
  }
  printf("exit: the region ended, which it must not\n");
  return 0;
}
