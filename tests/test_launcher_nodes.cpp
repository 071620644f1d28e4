// loomrun over several nodes, on this host (loopback only): the --hosts form with a local
// remote shell (tests/local-rsh: "ssh HOST CMD" without leaving the host) and the rendezvous
// form with two launchers, as users start them; the job's end when a rank fails on another
// node, when a node's launcher dies or goes silent, when the rendezvous never completes, when a
// host cannot be reached, and on Ctrl-C. The same across two machines: scripts/nodes-failures.sh.
#include <gtest/gtest.h>

#include "tests/run_command.hpp"
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

namespace fs = std::filesystem;

namespace {

using loom::test::Result;
using loom::test::run;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// pkill/pgrep patterns name node 1's launcher by its command line; "[1]" keeps the pattern from
// matching the shell that carries it.
class Nodes : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loom-nodes-test-" + std::to_string(getpid()) + "-" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string env() const { return "LOOM_SWEEP=1 LOOM_SHM_DIR=" + dir_.string() + " LOOM_RENDEZVOUS_ADDR=127.0.0.1 "; }
  // Two nodes of two ranks: this host's launcher, and "other-node"'s through the local shell.
  std::string hosts(const std::string& args) const {
    return env() + LOOMRUN_PATH + " --hosts localhost:2,other-node:2 --rsh " + LOCAL_RSH_PATH + " --timeout 60 " + args;
  }
  std::string node(int rank, int port, const std::string& args) const {
    return env() + LOOMRUN_PATH + " --nodes 2 --node-rank " + std::to_string(rank) + " --rendezvous 127.0.0.1:" +
           std::to_string(port) + " --timeout 60 " + args;
  }
  bool segments_left() const { return !fs::is_empty(dir_); }
  fs::path dir_;
};

TEST_F(Nodes, TheHostsFormRunsRanksOnEveryNode) {
  auto r = run(hosts(std::string(CRASH_HELPER_PATH) + " 0 ok"));
  EXPECT_EQ(r.status, 0) << r.output;
  for (int k = 0; k < 4; ++k) EXPECT_NE(r.output.find("[" + std::to_string(k) + "] hello from rank " + std::to_string(k)), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Nodes, TheRendezvousFormMeetsOverTcp) {
  const int port = free_port();
  const std::string prog = std::string(CRASH_HELPER_PATH) + " 0 ok";
  auto r = run("sh -c '" + node(1, port, "-n 2 " + prog) + " & other=$!; " + node(0, port, "-n 1 " + prog) +
               "; mine=$?; wait $other; theirs=$?; exit $((mine | theirs))'");
  EXPECT_EQ(r.status, 0) << r.output;
  for (int k = 0; k < 3; ++k) EXPECT_NE(r.output.find("[" + std::to_string(k) + "] hello from rank " + std::to_string(k)), std::string::npos) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Nodes, AFailingRankOnAnotherNodeEndsEveryNodeWithOneLine) {
  auto r = run(hosts(std::string(CRASH_HELPER_PATH) + " 3 exit"));
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("rank 3 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with status 3"), std::string::npos) << r.output;
  EXPECT_EQ(count(r.output, "terminating the job"), 1u) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
  EXPECT_FALSE(segments_left());
}

TEST_F(Nodes, ARendezvousThatNeverCompletesNamesTheMissingNode) {
  auto r = run("LOOM_RENDEZVOUS_TIMEOUT_MS=1000 " + node(0, free_port(), std::string("-n 1 ") + CRASH_HELPER_PATH + " 0 ok"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("node 1 never arrived"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10.0) << r.output;
}

TEST_F(Nodes, ANodeWithoutARendezvousIsAClearErrorNotAHang) {
  auto r = run("LOOM_RENDEZVOUS_TIMEOUT_MS=1000 " + node(1, free_port(), std::string("-n 1 ") + CRASH_HELPER_PATH + " 0 ok"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cannot reach the rendezvous"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10.0) << r.output;
}

TEST_F(Nodes, AHostThatCannotBeReachedIsAClearError) {
  auto r = run(env() + LOOMRUN_PATH + " --hosts localhost:1,other-node:1 --rsh false --timeout 60 " + CRASH_HELPER_PATH + " 0 ok");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the remote shell for other-node exited with status 1"), std::string::npos) << r.output;
  // Named as the rendezvous names a lost node (a node's launcher killed may show either way first).
  EXPECT_NE(r.output.find("lost rank 1 on other-node: the remote shell"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
  EXPECT_FALSE(segments_left());
}

// The launcher of node 1 is killed (and its ranks with it): node 0's ranks are ended and the
// job names node 1's.
TEST_F(Nodes, ANodeWhoseLauncherDiesIsNamed) {
  auto r = run("sh -c '" + hosts(std::string(CRASH_HELPER_PATH) + " 99 wait") +
               " & sleep 3; pkill -9 -f -- \"node-rank [1] --rendezvous 127.0.0.1\"; wait $!'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("lost ranks 2-3 on"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
}

// Node 1's launcher stops answering (SIGSTOP: a hung host): after LOOM_NODE_TIMEOUT_MS without a
// heartbeat the job ends naming node 1's ranks.
TEST_F(Nodes, ASilentNodeIsLostAfterTheNodeTimeout) {
  auto r = run("sh -c 'LOOM_HEARTBEAT_MS=100 LOOM_NODE_TIMEOUT_MS=1500 " + hosts(std::string(CRASH_HELPER_PATH) + " 99 wait") +
               " & sleep 3; pkill -STOP -f -- \"node-rank [1] --rendezvous 127.0.0.1\"; wait $!; status=$?;"
               " pkill -KILL -f -- \"node-rank [1] --rendezvous 127.0.0.1\"; exit $status'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("lost ranks 2-3 on"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing heard from its launcher for 1."), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
}

TEST_F(Nodes, CtrlCOnTheFirstNodeEndsEveryNode) {
  auto r = run("sh -c '" + hosts(std::string(CRASH_HELPER_PATH) + " 99 wait") + " & sleep 3; kill -INT $!; wait $!'");
  EXPECT_EQ(r.status, 130) << r.output;
  EXPECT_NE(r.output.find("received signal 2"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 15.0) << r.output;
  EXPECT_EQ(run("pgrep -f -- \"node-rank [1] --rendezvous 127.0.0.1\"").output, "") << "node 1's launcher is still running";
  EXPECT_FALSE(segments_left());
}

}  // namespace
