// loomrun: exit status, naming the failed rank, ending the job quickly, output prefixes, and
// leaving no segment behind however the job ends.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "tests/run_command.hpp"
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loom/dsm/runtime/job_dir.hpp"

namespace fs = std::filesystem;

namespace {
using loom::test::Result;
using loom::test::run;

class Launcher : public testing::Test {
 protected:
  void SetUp() override {
    // A parameterized test's name holds a '/' (TheJobEndsNamingTheRank/exit_barrier): as a path
    // it made a directory inside another, and TearDown left the outer one behind in /tmp.
    std::string name = testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("loom-launcher-test-" + std::to_string(getpid()) + "-" + name);
    ASSERT_EQ(dir_.parent_path(), fs::temp_directory_path()) << "one directory per test, removed whole by TearDown";
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Sweeping is on whatever the caller's environment says (scripts/test.sh turns it off for
  // the suite); these jobs only ever see the test's own directory.
  std::string loomrun(const std::string& args, bool sweep = true) {
    return std::string("LOOM_SWEEP=") + (sweep ? "1" : "0") + " LOOM_SHM_DIR=" + dir_.string() + " " + LOOMRUN_PATH + " " + args;
  }
  bool segments_left() const { return !fs::is_empty(dir_); }
  std::vector<fs::path> job_dirs() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path());
    return out;
  }
  // Starts a job in the background whose ranks wait forever once up; returns loomrun's pid
  // after every rank has said hello.
  pid_t start_waiting_job(int n) {
    const fs::path out = dir_.string() + ".out" + std::to_string(jobs_++);
    auto r = run("sh -c '" + loomrun("-n " + std::to_string(n) + " " + CRASH_HELPER_PATH + " 99 wait") + " > " +
                 out.string() + " 2>&1 & echo $!'");
    pid_t pid = static_cast<pid_t>(std::stol(r.output));
    const std::string last = "[" + std::to_string(n - 1) + "] hello from rank " + std::to_string(n - 1);
    for (int i = 0; i < 500; ++i) {
      std::ifstream f(out);
      std::stringstream ss;
      ss << f.rdbuf();
      if (ss.str().find(last) != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    fs::remove(out);
    return pid;
  }
  // Waits (up to 10 s) until no process holds `d`: the killed job's ranks are gone.
  static bool wait_unheld(const fs::path& d) {
    for (int i = 0; i < 500; ++i) {
      int fd = open(d.c_str(), O_RDONLY | O_DIRECTORY);
      if (fd < 0) return true;
      bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
      close(fd);
      if (free) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  fs::path dir_;
  int jobs_ = 0;
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

// Ranks write to a pipe (fully buffered by default): what they wrote must survive the job being
// ended by loomrun, partial lines included (once lost).
TEST_F(Launcher, OutputOfRanksEndedByTheLauncherIsNotLost) {
  auto r = run(loomrun(std::string("-n 3 ") + CRASH_HELPER_PATH + " 0 unflushed"));
  EXPECT_EQ(r.status, 3) << r.output;
  for (int k = 1; k < 3; ++k) {
    const std::string rk = "[" + std::to_string(k) + "] rank " + std::to_string(k);
    EXPECT_NE(r.output.find(rk + ": a whole line"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(rk + ": a partial line"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(segments_left());
}

// stdout and stderr of every rank on one pipe (2>&1): each line arrives whole, with one prefix.
TEST_F(Launcher, LinesOfBothStreamsArriveWhole) {
  auto r = run(loomrun("-n 3 sh -c 'i=0; while [ $i -lt 3000 ]; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done'"));
  EXPECT_EQ(r.status, 0);
  std::stringstream lines(r.output);
  size_t n = 0, bad = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const bool whole = line.size() > 4 && line[0] == '[' && line[2] == ']' && line.find('[', 1) == std::string::npos &&
                       (line.compare(4, 4, "out ") == 0 || line.compare(4, 4, "err ") == 0);
    if (!whole && ++bad <= 3) ADD_FAILURE() << "a broken line: '" << line << "'";
  }
  EXPECT_EQ(n, 3u * 2 * 3000) << bad << " broken lines";
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

// A rank that exits with status 0 before a barrier the others wait in: they name it and fail,
// and the job ends with an error instead of hanging.
TEST_F(Launcher, ARankThatLeftEarlyIsNamedNotWaitedForForever) {
  auto r = run(loomrun(std::string("-n 3 --timeout 60 ") + CRASH_HELPER_PATH + " 1 leave"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the job hung until the timeout: " << r.output;
  EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ended without the collective teardown"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
  EXPECT_FALSE(segments_left());
}

// A rank that leaves (status 0) while holding a shared-region lock: the rank queued behind it
// names it and fails, instead of waiting for a grant that never comes.
TEST_F(Launcher, ALockHolderThatLeftIsNamedNotWaitedForForever) {
  auto r = run(loomrun(std::string("-n 3 --timeout 60 ") + CRASH_HELPER_PATH + " 0 lock-leave"));
  EXPECT_EQ(r.status, 14) << r.output;
  EXPECT_NE(r.output.find("lock error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is gone"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
  EXPECT_FALSE(segments_left());
}

// A shared-memory file system too small for what the job asks (Docker's default /dev/shm is
// 64 MiB): the allocation fails with a clear error naming the room left, never a SIGBUS at the
// first touch. Needs a tmpfs of its own, so root (as in CI) or it is skipped.
TEST_F(Launcher, AFullSharedMemoryFileSystemIsAClearErrorNotASigbus) {
  const fs::path small = dir_ / "small";
  fs::create_directories(small);
  if (run("mount -t tmpfs -o size=64m,mode=1777 loom-test " + small.string()).status != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (not root?)";
  auto r = run("LOOM_HUGE_PAGES=0 LOOM_SWEEP=0 LOOM_SHM_DIR=" + small.string() + " " + LOOMRUN_PATH +
               " -n 2 --timeout 60 " + CRASH_HELPER_PATH + " 0 big");
  const bool left = !fs::is_empty(small);
  run("umount " + small.string());
  EXPECT_EQ(r.status, 15) << r.output;
  EXPECT_NE(r.output.find("allocation error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bytes free there"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("file system is full"), std::string::npos) << r.output;
  EXPECT_FALSE(left) << "the job left segments behind";
}

TEST_F(Launcher, APeerThatDiedIsAClearErrorNotAHang) {
  auto r = run(loomrun(std::string("-n 3 --timeout 60 ") + CRASH_HELPER_PATH + " 2 vanish"));
  EXPECT_EQ(r.status, 0) << r.output;
  for (int k = 0; k < 2; ++k) {
    EXPECT_NE(r.output.find("[" + std::to_string(k) + "] rank " + std::to_string(k) + ": SEND to vanished rank 2: peer unreachable"),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("[" + std::to_string(k) + "] rank " + std::to_string(k) + ": service call error: service call to rank 2: rank 2 is gone"),
              std::string::npos) << r.output;
  }
  EXPECT_FALSE(segments_left());
}

// The kill / exit / exit-0 / SIGSTOP matrix over the waits of every layer: however a rank ends
// or stops while the others wait for it (bootstrap barrier, a shared-region lock it holds, a
// shared-region barrier, a service call to it), the job ends within seconds, names the rank and
// fails, and leaves nothing behind. A stop is loomrun's to see (LOOM_STOPPED_LIMIT_MS);
// a rank that leaves with status 0 is seen by the wait itself.
class LeaveMatrix : public Launcher, public testing::WithParamInterface<std::tuple<std::string, std::string>> {};

std::string matrix_case_name(const testing::TestParamInfo<LeaveMatrix::ParamType>& info) {
  std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

TEST_P(LeaveMatrix, TheJobEndsNamingTheRank) {
  const auto& [way, layer] = GetParam();
  auto r = run("LOOM_STOPPED_LIMIT_MS=1000 " + loomrun(std::string("-n 3 --timeout 60 ") + CRASH_HELPER_PATH + " 1 " + way + " " + layer));
  EXPECT_NE(r.status, 124) << "the job hung until the timeout: " << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
  if (way == "kill" || way == "exit") {
    // loomrun reaps the victim, or a waiter sees it gone first and fails (status 14).
    const int own = way == "kill" ? 128 + SIGKILL : 3;
    EXPECT_TRUE(r.status == own || r.status == 14) << r.output;
    EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  } else if (way == "stop") {
    EXPECT_EQ(r.status, 128 + SIGSTOP) << r.output;
    EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("was stopped by signal"), std::string::npos) << r.output;
  } else if (layer == "fetch") {  // leave, seen inside a fault handler: the process ends with status 1
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("fault on block 0"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rank 1 is gone"), std::string::npos) << r.output;
  } else {  // leave: status 0 without the teardown; a waiter names rank 1 and fails
    EXPECT_EQ(r.status, 14) << r.output;
    EXPECT_NE(r.output.find(layer + " error"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(segments_left());
}

INSTANTIATE_TEST_SUITE_P(Ways, LeaveMatrix,
                         testing::Combine(testing::Values("exit", "kill", "stop", "leave"),
                                          testing::Values("barrier", "lock", "dsm-barrier", "call", "fetch", "invoke", "rpipe")),
                         matrix_case_name);

// The same matrix under a PMIx launcher (Open MPI's mpirun). It ends a job whose rank exits,
// but nothing there watches for a stopped rank: the waits see it themselves (on this host, for
// LOOM_STOPPED_LIMIT_MS), and name a rank that left with status 0 unless mpirun ended the job
// first (it names the rank then). A crashed PMIx job's shm
// directory is left to the next job's sweep (docs/user-guide.md), so it is not checked here.
class PmixLeaveMatrix : public LeaveMatrix {};

TEST_P(PmixLeaveMatrix, TheJobEndsNamingTheRank) {
  if (std::string(MPIRUN_PATH).empty()) GTEST_SKIP() << "no PMIx launcher (mpirun) here";
  const auto& [way, layer] = GetParam();
  // mpirun (Open MPI 4.1) sometimes hangs after every rank has ended, its children left
  // unreaped (1 in about 12 ASan runs of the matrix): that run is Open MPI's, not the waits',
  // and is run again; ranks still alive at the limit fail the test.
  const std::string cmd = std::string(MPIRUN_PATH) + " -n 3 --oversubscribe --allow-run-as-root -x LOOM_SHM_DIR=" +
                          dir_.string() + " -x LOOM_EXPECT_BOOTSTRAP=pmix -x LOOM_STOPPED_LIMIT_MS=1000 " + CRASH_HELPER_PATH +
                          " 1 " + way + " " + layer;
  Result r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = loom::test::run_watched(cmd, 60, 10);
    if (!r.launcher_hung) break;
    std::cerr << "mpirun hung after every rank had ended; running the case again. Its output:\n" << r.output;
  }
  ASSERT_FALSE(r.launcher_hung) << "mpirun hung after its ranks had ended three times: " << r.output;
  EXPECT_NE(r.status, 124) << "the job hung until the timeout: " << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
  if (way == "stop") {
    EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("has been stopped by a signal"), std::string::npos) << r.output;
  } else if (way == "leave") {
    // Named by a waiting rank, or by mpirun itself when it ends the job first (it does so as
    // soon as a rank exits without finalizing, which can beat the waits' next look).
    const bool named = r.output.find("rank 1 is gone") != std::string::npos || r.output.find("process rank 1 ") != std::string::npos;
    EXPECT_TRUE(named) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ways, PmixLeaveMatrix,
                         testing::Combine(testing::Values("exit", "kill", "stop", "leave"),
                                          testing::Values("barrier", "lock", "dsm-barrier", "call", "fetch", "invoke", "rpipe")),
                         matrix_case_name);

// The PMIx matrix's watch: a launcher whose children have all ended but which does not end is
// told apart from one whose children are still running at the limit.
TEST_F(Launcher, TheWatchTellsAHungLauncherFromHungRanks) {
  auto r = loom::test::run_watched("perl -e '$|=1; fork or exec \"sleep\", \"0.2\"; print \"up\\n\"; sleep 100'", 30, 1);
  EXPECT_TRUE(r.launcher_hung) << r.output;
  EXPECT_NE(r.output.find("up"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10.0);
  r = loom::test::run_watched("perl -e 'fork or exec \"sleep\", \"100\"; sleep 100'", 1, 1);
  EXPECT_FALSE(r.launcher_hung);
  EXPECT_EQ(r.status, 124);
  r = loom::test::run_watched("sh -c 'sleep 0.2; exit 3'", 30, 1);
  EXPECT_FALSE(r.launcher_hung);
  EXPECT_EQ(r.status, 3);
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

// --emulate-nodes splits this host's ranks; more nodes than ranks, real hosts, a wire that is
// not one, and nodes without a wire are each refused with the reason.
TEST_F(Launcher, BadEmulatedNodesAreRefusedWithTheReason) {
  auto r = run(loomrun("-n 2 --emulate-nodes 3 true"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--emulate-nodes 3 exceeds the 2 ranks"), std::string::npos) << r.output;
  r = run(loomrun("--hosts localhost:2 --emulate-nodes 2 true"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("emulates nodes on this host"), std::string::npos) << r.output;
  r = run("LOOM_WIRE=ib-edr " + loomrun("-n 2 --emulate-nodes 0 true"));
  EXPECT_EQ(r.status, 2) << r.output;
  r = run("LOOM_WIRE=fast " + loomrun("-n 2 --emulate-nodes 2 " + std::string(LOOM_INFO_PATH)));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("LOOM_WIRE=fast: not a preset"), std::string::npos) << r.output;
  r = run(loomrun("-n 2 --emulate-nodes 2 " + std::string(LOOM_INFO_PATH)));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("set LOOM_WIRE too"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

// --timeout takes a positive number of seconds: text, a sign, nan and inf were taken as "no
// timeout" (atof) and the job could hang forever.
TEST_F(Launcher, ABadTimeoutIsRefused) {
  for (const char* bad : {"abc", "-5", "nan", "inf", "0", "1x"}) {
    auto r = run(loomrun(std::string("-n 1 --timeout ") + bad + " true"));
    EXPECT_EQ(r.status, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--timeout"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("positive number of seconds"), std::string::npos) << r.output;
  }
  auto r = run(loomrun("-n 1 --timeout 0.5 sleep 30"));
  EXPECT_EQ(r.status, 124) << r.output;
  EXPECT_FALSE(segments_left());
}

// A bad setting read by loomrun itself is a clear error, not an abort with an uncaught
// exception.
TEST_F(Launcher, ABadSettingOfTheLauncherIsAClearError) {
  auto r = run("LOOM_SWEEP=abc LOOM_SHM_DIR=" + dir_.string() + " " + LOOMRUN_PATH + " -n 1 true");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("loomrun: LOOM_SWEEP='abc' is not a boolean"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

// "--" ends loomrun's options (a program whose name starts with '-', or options passed on);
// it was refused as an unknown option.
TEST_F(Launcher, DoubleDashEndsTheOptions) {
  auto r = run(loomrun("-n 2 -- sh -c 'echo rank $LOOM_RANK'"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[1] rank 1"), std::string::npos) << r.output;
  r = run(loomrun("-n 2 --"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no program"), std::string::npos) << r.output;
  r = run(loomrun("true"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-n is required"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

// A launcher killed outright cannot clean up; its ranks die with it (and let go of the job
// directory), and the next job to start removes what they left.
TEST_F(Launcher, AJobWhoseLauncherWasKilledIsSweptByTheNextJob) {
  pid_t launcher = start_waiting_job(2);
  ASSERT_GT(launcher, 0);
  auto dirs = job_dirs();
  ASSERT_EQ(dirs.size(), 1u);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_TRUE(wait_unheld(dirs[0])) << "the killed job's ranks still hold " << dirs[0];
  EXPECT_TRUE(fs::exists(dirs[0]));  // nobody was left to remove it
  auto r = run(loomrun(std::string("-n 2 ") + CRASH_HELPER_PATH + " 0 ok"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("removed " + dirs[0].string()), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left()) << "segments left behind in " << dir_;
}

// A lone process (no loomrun) that is killed leaves its directory; with LOOM_SWEEP=0 the next
// job keeps it (for a post-mortem), otherwise removes it.
TEST_F(Launcher, ALoneProcessKilledIsSweptUnlessSweepingIsOff) {
  auto r = run("LOOM_SWEEP=1 LOOM_SHM_DIR=" + dir_.string() + " " + CRASH_HELPER_PATH + " 0 kill");
  EXPECT_EQ(r.status, 128 + 9) << r.output;
  auto dirs = job_dirs();
  ASSERT_EQ(dirs.size(), 1u) << r.output;
  r = run(loomrun(std::string("-n 2 ") + CRASH_HELPER_PATH + " 0 ok", false));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(job_dirs(), dirs);
  r = run(loomrun(std::string("-n 2 ") + CRASH_HELPER_PATH + " 0 ok"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(segments_left()) << "segments left behind in " << dir_;
}

// A sweep takes only what nobody holds: a job that is running keeps its directory and runs on.
TEST_F(Launcher, ASweepLeavesARunningJobAlone) {
  pid_t launcher = start_waiting_job(3);
  ASSERT_GT(launcher, 0);
  auto dirs = job_dirs();
  ASSERT_EQ(dirs.size(), 1u);
  auto r = run(loomrun(std::string("-n 2 ") + CRASH_HELPER_PATH + " 0 ok"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("removed"), std::string::npos) << r.output;
  EXPECT_EQ(job_dirs(), dirs);
  EXPECT_EQ(kill(launcher, 0), 0);  // still running
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  for (int i = 0; i < 500 && kill(launcher, 0) == 0; ++i) {
    waitpid(launcher, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(segments_left()) << "segments left behind in " << dir_;
}

// The lock decides: a directory someone holds stays, whatever its name says; once let go, it is
// swept. (A PMIx job's name carries no process id, so the lock is all there is; a loomrun job's
// ranks may outlive a killed launcher for a moment.)
TEST_F(Launcher, SweepTakesExactlyTheDirectoriesNobodyHolds) {
  setenv("LOOM_SHM_DIR", dir_.c_str(), 1);
  setenv("LOOM_SWEEP", "1", 1);
  const std::string held = (dir_ / "loom-pmix-held").string();
  const std::string dead_namer = (dir_ / "loom-999999999-0000abcd").string();  // no such pid
  const std::string free_dir = (dir_ / "loom-pmix-free").string();
  int h1 = loom::runtime::create_job_dir(held);
  int h2 = loom::runtime::create_job_dir(dead_namer);
  ASSERT_GE(h1, 0);
  ASSERT_GE(h2, 0);
  ASSERT_TRUE(fs::create_directory(free_dir));
  std::ofstream(free_dir + "/seg.0.1") << "x";
  EXPECT_EQ(loom::runtime::create_job_dir(held), -1);  // exists
  EXPECT_EQ(errno, EEXIST);
  auto removed = loom::runtime::sweep_stale_job_dirs();
  EXPECT_EQ(removed, std::vector<std::string>{free_dir});
  EXPECT_TRUE(fs::exists(held));
  EXPECT_TRUE(fs::exists(dead_namer));
  close(h2);
  removed = loom::runtime::sweep_stale_job_dirs();
  EXPECT_EQ(removed, std::vector<std::string>{dead_namer});
  setenv("LOOM_SWEEP", "0", 1);
  close(h1);
  EXPECT_TRUE(loom::runtime::sweep_stale_job_dirs().empty());
  EXPECT_TRUE(fs::exists(held));
  unsetenv("LOOM_SWEEP");
  unsetenv("LOOM_SHM_DIR");
}

// Misuse that used to pass in silence, hang or crash without a word ends the job with an error
// that names what happened (tests/misuse_helper.cpp).
class Misuse : public Launcher {
 protected:
  // `env`: settings for the job ("LOOM_CHECK=on ..."); the suite's own LOOM_CHECK is replaced.
  Result misuse(const std::string& mode, const std::string& env = "LOOM_CHECK=on", const std::string& opts = "-n 2 --timeout 60") {
    return run(env + " " + loomrun(opts + " " + MISUSE_HELPER_PATH + " " + mode));
  }
};

TEST_F(Misuse, AFunctionOneRankLacksIsNamedAtStartUp) {
  auto r = misuse("registry");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("function registries differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'misuse.only_on_one': registered on rank 1, missing on rank 0"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Misuse, QueuePairsPerPeerThatDifferBetweenProcessesAreNamedAtStartUp) {
  auto r = misuse("qps-differ", "LOOM_CHECK=off");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("LOOM_QPS_PER_PEER is 1 here (rank 0) but 2 on rank 1"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Misuse, ACallToAnUnknownFunctionFailsTheJob) {
  auto r = misuse("bad-call");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("[1] loom: error: invoke: bad call from rank 0 (function id 0xdeadbeef): unknown function id"),
            std::string::npos) << r.output;
}

TEST_F(Misuse, CallsNeverRunAreAnErrorAtTeardown) {
  auto r = misuse("unpolled");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("[1] loom: error: invoke: 1 call to thread 1/0 never ran"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 x loom::invoke::detail::CallEntry<(anonymous namespace)::unpolled"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ran\n"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Misuse, AFaultInARemotelyCalledFunctionNamesTheCall) {
  auto r = misuse("fault");
  EXPECT_NE(r.status, 0) << r.output;  // 128 + SIGSEGV, or a sanitizer's own status after its report
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("[1] loom: SIGSEGV at address 0x"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" in a remotely called function, loom::invoke::detail::CallEntry<(anonymous namespace)::fault"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("run for rank 0 on thread 0"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Misuse, ALockMadeByOneRankOnlyIsAnErrorNotAWrongCount) {
  auto r = misuse("make-lock");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_EQ(r.output.find("count "), std::string::npos) << "the program went on: " << r.output;
  EXPECT_NE(r.output.find("the processes' collective calls differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0: collective call #"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", Space::make_lock at tests/misuse_helper.cpp:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", Space::barrier at tests/misuse_helper.cpp:"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

// Without the checking mode the barriers' messages still carry each process's collective call.
TEST_F(Misuse, ALockMadeByOneRankOnlyFailsAtTheNextBarrierInEveryMode) {
  auto r = misuse("make-lock", "LOOM_CHECK=off");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_EQ(r.output.find("count "), std::string::npos) << "the program went on: " << r.output;
  EXPECT_NE(r.output.find("the processes' collective calls differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", Space::barrier at tests/misuse_helper.cpp:"), std::string::npos) << r.output;
}

TEST_F(Misuse, AnInvokerBarrierAfterDifferentCollectivesIsAnError) {
  auto r = misuse("invoke-barrier", "LOOM_CHECK=off");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_EQ(r.output.find("after the barrier"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the processes' collective calls differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Invoker::barrier at tests/misuse_helper.cpp:"), std::string::npos) << r.output;
}

TEST_F(Misuse, AnExtraSpaceBarrierIsAnErrorInCheckingMode) {
  auto r = misuse("dsm-barrier");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find(", Space::barrier at tests/misuse_helper.cpp:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", Space::~Space"), std::string::npos) << r.output;
}

// Without checking mode too: each process posts its collective call where the others of the
// host see it, and a wait that sleeps compares. The extra barrier once waited for ever (a stall
// warning every LOOM_STALL_REPORT_MS until the launcher's timeout); the other rank's teardown
// now finds rank 0 in another call of the same number at once.
TEST_F(Misuse, AnExtraSpaceBarrierIsNamedAtOnceWithoutCheckingMode) {
  auto r = misuse("dsm-barrier", "LOOM_CHECK=off", "-n 2 --timeout 60");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("the processes' collective calls differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("collective call #3, Space::barrier"), std::string::npos) << r.output;
  // Whichever rank's wait sleeps first reports: rank 1 names rank 0's barrier and its own
  // teardown; rank 0 names its barrier and a call it never made (it knows kinds by what it made).
  const bool named = r.output.find("collective call #3, Space::~Space") != std::string::npos ||
                     r.output.find("collective call #3, a collective this process never made") != std::string::npos;
  EXPECT_TRUE(named) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
}

// A lock made by one rank only, then an Invoker barrier everywhere, at 4 ranks: found at once
// without checking mode (rank 0's make_lock waits in the bootstrap while the others are in the
// barrier; the posted calls differ).
TEST_F(Misuse, ACollectiveOfOneRankIsNamedAtOnceWithoutCheckingModeAt4) {
  auto r = misuse("invoke-barrier", "LOOM_CHECK=off", "-n 4 --timeout 60");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("the processes' collective calls differ"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("after the barrier"), std::string::npos) << r.output;
}

TEST_F(Misuse, ABarrierWithFewerThreadsThanStartedIsReported) {
  auto r = misuse("threads", "LOOM_STALL_REPORT_MS=300", "-n 2 --threads 2 --timeout 4");
  EXPECT_EQ(r.status, 124) << r.output;
  EXPECT_NE(r.output.find("Space::barrier waits for this process's other worker threads: 1 of 2 arrived"),
            std::string::npos) << r.output;
}

TEST_F(Misuse, TheProcessBarrierAfterRegionWritesIsAWarningInCheckingMode) {
  auto r = misuse("rt-barrier");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[0] loom warning: coherence: Runtime::barrier() at tests/misuse_helper.cpp:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("does not publish them"), std::string::npos) << r.output;
}

// Every LOOM_* variable is checked at start-up: a mistyped name is a warning from rank 0 naming
// the nearest setting (it used to be ignored in silence), and an invalid value of a setting
// this run would not read is an error (LOOM_HUGE_PAGES is read only where hugetlbfs is mounted).
TEST_F(Misuse, AMistypedSettingIsAWarningNamingTheNearest) {
  auto r = misuse("rt-barrier", "LOOM_CHECK=on LOOM_COHERENCE_POLCY=fixed-dir");
  EXPECT_EQ(r.status, 0) << r.output;
  const std::string warning = "[0] loom warning: LOOM_COHERENCE_POLCY is not a setting of this program; the nearest is LOOM_COHERENCE_POLICY";
  EXPECT_NE(r.output.find(warning), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[1] loom warning: LOOM_COHERENCE_POLCY"), std::string::npos) << "rank 0 alone warns: " << r.output;
}

TEST_F(Misuse, AnInvalidValueOfAnyDeclaredSettingStopsTheJob) {
  auto r = misuse("rt-barrier", "LOOM_CHECK=on LOOM_HUGE_PAGES=abc");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("loom: error: LOOM_HUGE_PAGES='abc' is not a boolean"), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}
