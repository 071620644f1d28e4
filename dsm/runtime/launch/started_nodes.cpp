// Starting the node launchers of a --hosts job and relaying their output.
#include "loom/dsm/runtime/launch/started_nodes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "loom/dsm/runtime/launch/hosts.hpp"

namespace loom::runtime::launch {

StartedNodes::StartedNodes(const Options& o, char** argv, const std::string& addr, int port)
    : o_(o), argv_(argv), addr_(addr), port_(port) {}

StartedNodes::~StartedNodes() {
  for (auto& n : nodes_)
    for (int w : {1, 2})
      if (n.fd[w] >= 0) ::close(n.fd[w]);
}

bool StartedNodes::start() {
  nodes_.resize(o_.hosts.size());
  for (size_t k = 0; k < o_.hosts.size(); ++k) {
    Node& n = nodes_[k];
    n.index = static_cast<int>(k);
    n.host = o_.hosts[k].host;
    n.remote = !is_this_host(n.host);
    const auto node_argv = node_command(o_, argv_, n.index, addr_, port_);
    const auto cmd = n.remote ? remote_command(o_, n.host, node_argv) : node_argv;
    std::vector<char*> c;
    for (const auto& w : cmd) c.push_back(const_cast<char*>(w.c_str()));
    c.push_back(nullptr);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      start_failure_ = std::string("cannot start the node launchers: pipe: ") + std::strerror(errno);
      return false;
    }
    const pid_t launcher = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      start_failure_ = std::string("cannot start the node launchers: fork: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      // Its own process group: Ctrl-C reaches this launcher, which ends every node in order.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) _exit(127);
      const int null = ::open("/dev/null", O_RDONLY);
      dup2(null, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      signal(SIGPIPE, SIG_DFL);
      execvp(c[0], c.data());
      std::fprintf(stderr, "loomrun: cannot execute %s: %s\n", c[0], std::strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);
    ::close(out[1]);
    ::close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    n.pid = pid;
    n.fd[1] = out[0];
    n.fd[2] = err[0];
    n.running = true;
  }
  return true;
}

void StartedNodes::add_to(PollSet& ps) {
  for (auto& n : nodes_)
    for (int w : {1, 2})
      if (n.fd[w] >= 0) ps.add(n.fd[w], POLLIN, [this, &n, w](short) { relay(n, w); });
}

// Whole lines only: two nodes' output never mixes within a line.
void StartedNodes::relay(Node& n, int which) {
  FILE* to = which == 1 ? stdout : stderr;
  char tmp[8192];
  for (;;) {
    const ssize_t r = ::read(n.fd[which], tmp, sizeof tmp);
    if (r > 0) {
      n.buf[which].append(tmp, static_cast<size_t>(r));
      size_t pos;
      while ((pos = n.buf[which].find('\n')) != std::string::npos) {
        std::fwrite(n.buf[which].data(), 1, pos + 1, to);
        n.buf[which].erase(0, pos + 1);
      }
      std::fflush(to);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 || errno != EAGAIN) {
      ::close(n.fd[which]);
      n.fd[which] = -1;
    }
    return;
  }
}

std::string StartedNodes::ranks_of(const Node& n) const {
  int first = 0;
  for (int i = 0; i < n.index; ++i) first += o_.hosts[static_cast<size_t>(i)].procs;
  const int last = first + o_.hosts[static_cast<size_t>(n.index)].procs - 1;
  return (first == last ? "rank " + std::to_string(first) : "ranks " + std::to_string(first) + "-" + std::to_string(last)) + " on " + n.host;
}

void StartedNodes::tick(bool job_over, std::chrono::milliseconds grace) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
    for (auto& n : nodes_) {
      if (n.pid != p || !n.running) continue;
      n.running = false;
      if (job_over || (WIFEXITED(st) && WEXITSTATUS(st) == 0)) continue;
      // Named as the rendezvous names a node it lost, whichever of the two notices first.
      const std::string what = n.remote ? "the remote shell for " + n.host : "the launcher of node " + std::to_string(n.index);
      failures_.push_back("lost " + ranks_of(n) + ": " +
                          (WIFEXITED(st) ? what + " exited with status " + std::to_string(WEXITSTATUS(st))
                                         : what + " was killed by signal " + std::to_string(WTERMSIG(st))));
    }
  }
  if (!job_over) return;
  const auto now = Clock::now();
  if (!over_) {
    over_ = true;
    over_at_ = now;
  }
  auto signal_all = [&](int sig) {
    for (auto& n : nodes_)
      if (n.running) kill(-n.pid, sig);
  };
  if (!termed_ && now - over_at_ > grace) signal_all(SIGTERM), termed_ = true;
  if (!killed_ && now - over_at_ > grace + std::chrono::seconds(1)) signal_all(SIGKILL), killed_ = true;
}

std::optional<std::string> StartedNodes::take_failure() {
  if (failures_.empty()) return std::nullopt;
  std::string f = failures_.front();
  failures_.erase(failures_.begin());
  return f;
}

bool StartedNodes::running() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.running || n.fd[1] >= 0 || n.fd[2] >= 0; });
}

void StartedNodes::flush_output() {
  for (auto& n : nodes_)
    for (int w : {1, 2})
      if (!n.buf[w].empty()) {
        std::fprintf(w == 1 ? stdout : stderr, "%s\n", n.buf[w].c_str());
        n.buf[w].clear();
      }
}

}  // namespace loom::runtime::launch
