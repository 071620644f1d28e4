// gtest main for multi-process tests run under loomrun. Every rank runs every test; tests that
// talk across ranks use collective steps. A failure on one rank ends that rank at once (so the
// others cannot pair up mismatched barriers) and loomrun then ends the job naming the rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "tests/mp_test.hpp"
#include "tests/test_settings_table.hpp"  // the suites' own settings, known to the start-up check

namespace {
class FailFast : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "FAILED on rank %d: %s:%d: %s\n", loom::Runtime::current().rank(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(1);
  }
};
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  loom::Runtime rt(argc, argv);
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rt.rank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new FailFast);
  int rc = RUN_ALL_TESTS();
  rt.barrier();
  return rc;
}
