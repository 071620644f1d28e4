// A Loom program for the launcher tests: every rank brings up the runtime (so the job has
// shared segments), then the rank named by argv[1] fails in the way argv[2] says while the
// others wait forever. The launcher must end the job, name the rank and clean up.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dsm/runtime/runtime.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: crash_helper RANK exit|kill|ok\n");
    return 2;
  }
  loom::Runtime rt(argc, argv);
  auto chunk = rt.allocator().allocate_chunk(1 << 20);  // a registered segment on every rank
  std::printf("hello from rank %d\n", rt.rank());
  std::fflush(stdout);
  rt.barrier();
  if (std::strcmp(argv[2], "ok") == 0) {
    rt.allocator().free_chunk(chunk);
    return 0;
  }
  if (rt.rank() == std::atoi(argv[1])) {
    if (std::strcmp(argv[2], "exit") == 0) std::exit(3);
    if (std::strcmp(argv[2], "kill") == 0) raise(SIGKILL);
  }
  for (;;) pause();
}
