// loomrun: exit status, naming the failed rank, ending the job quickly, output prefixes, and
// leaving no segment behind however the job ends.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {
struct Result {
  int status;
  std::string output;
  double seconds;
};

// Runs a shell command line, capturing stdout and stderr together.
Result run(const std::string& cmd) {
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  Result r{-1, {}, 0};
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

class Launcher : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loom-launcher-test-" + std::to_string(getpid()) + "-" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string loomrun(const std::string& args) {
    return "LOOM_SHM_DIR=" + dir_.string() + " " + LOOMRUN_PATH + " " + args;
  }
  bool segments_left() const { return !fs::is_empty(dir_); }
  fs::path dir_;
};
}  // namespace

TEST_F(Launcher, SuccessPrefixesOutputAndCleansUp) {
  auto r = run(loomrun(std::string("-n 3 ") + CRASH_HELPER_PATH + " 0 ok"));
  EXPECT_EQ(r.status, 0) << r.output;
  for (int k = 0; k < 3; ++k) EXPECT_NE(r.output.find("[" + std::to_string(k) + "] hello from rank " + std::to_string(k)), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Launcher, NonZeroExitEndsTheJobAndNamesTheRank) {
  auto r = run(loomrun(std::string("-n 4 ") + CRASH_HELPER_PATH + " 2 exit"));
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("rank 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with status 3"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_FALSE(segments_left()) << "segments left behind in " << dir_;
}

TEST_F(Launcher, SigkillEndsTheJobWithinTwoSeconds) {
  // Time from the kill, not from start-up: the helper prints once every rank is up.
  auto r = run(loomrun(std::string("-n 4 ") + CRASH_HELPER_PATH + " 1 kill"));
  EXPECT_EQ(r.status, 128 + 9) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("killed by signal 9"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left()) << "segments left behind in " << dir_;
}

TEST_F(Launcher, SigkillLatencyIsUnderTwoSeconds) {
  // A plain program: the job's end is measured from the moment rank 0 kills itself.
  auto r = run("(" + loomrun("-n 3 sh -c 'if [ $LOOM_RANK = 0 ]; then sleep 0.3; date +%s.%N; kill -9 $$; fi; sleep 30'") +
               "; date +%s.%N)");
  // Output: "[0] <kill time>" ... "<end time>"
  auto pos = r.output.find("[0] ");
  ASSERT_NE(pos, std::string::npos) << r.output;
  double killed = std::stod(r.output.substr(pos + 4));
  auto last_nl = r.output.find_last_of('\n', r.output.size() - 2);
  double ended = std::stod(r.output.substr(last_nl + 1));
  EXPECT_LT(ended - killed, 2.0) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Launcher, APeerThatDiedIsAClearErrorNotAHang) {
  auto r = run(loomrun(std::string("-n 3 --timeout 60 ") + CRASH_HELPER_PATH + " 2 vanish"));
  EXPECT_EQ(r.status, 0) << r.output;
  for (int k = 0; k < 2; ++k) {
    EXPECT_NE(r.output.find("[" + std::to_string(k) + "] rank " + std::to_string(k) + ": SEND to vanished rank 2: peer unreachable"),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("[" + std::to_string(k) + "] rank " + std::to_string(k) + ": service call error: service call to rank 2: the peer died"),
              std::string::npos) << r.output;
  }
  EXPECT_FALSE(segments_left());
}

TEST_F(Launcher, BadUsageIsAClearError) {
  auto r = run(loomrun("-n 0 true"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("must be 1..1024"), std::string::npos) << r.output;
  r = run(loomrun("-n 2 /nonexistent/program"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("cannot execute"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}
