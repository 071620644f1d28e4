#pragma once
// Runs a shell command line for the launcher tests: its exit status (128+N for a signal), its
// stdout and stderr together, and how long it took. run_watched also watches a launcher's
// children and tells a launcher that hung after its ranks had ended from ranks that hung.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace loom::test {

struct Result {
  int status;
  std::string output;
  double seconds;
  bool launcher_hung = false;  // run_watched: every rank had ended, the launcher had not
};

inline Result run(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  Result r{-1, {}, 0};
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// The children of `pid` (every thread's) that have not yet ended: zombies do not count.
inline int live_children(pid_t pid) {
  namespace fs = std::filesystem;
  int live = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(task.path() / "children");
    for (pid_t c; f >> c;) {
      std::ifstream stat("/proc/" + std::to_string(c) + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z') ++live;
    }
  }
  return live;
}

// Runs `cmd` (exec'd by sh in its own process group) for at most `limit_s` seconds, then sends
// it a TERM and 5 s later kills its group: status 124. Once it has had children and none is
// left alive, it has `grace_s` seconds to end, else it is killed and the result says
// launcher_hung.
inline Result run_watched(const std::string& cmd, double limit_s, double grace_s) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  Result r{-1, {}, 0};
  int fds[2];
  if (pipe(fds) != 0) return r;
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1), dup2(fds[1], 2), close(fds[0]), close(fds[1]);
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  setpgid(pid, pid);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  bool had_children = false, terminated = false, killed = false;
  clock::time_point ended{};
  int st = 0;
  auto drain = [&](int wait_ms) {
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, wait_ms);
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<size_t>(n));
  };
  for (;;) {
    drain(100);
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    if (killed) continue;
    const int live = live_children(pid);
    had_children = had_children || live > 0;
    if (live > 0 || !had_children) ended = {};
    else if (ended == clock::time_point{}) ended = clock::now();
    if (ended != clock::time_point{} && since(ended) > grace_s) {  // nothing of the job is left to end
      r.launcher_hung = true;
      killpg(pid, SIGKILL), killed = true;
    } else if (!terminated && since(t0) > limit_s) {  // the launcher ends its ranks on a TERM
      kill(pid, SIGTERM), terminated = true;
    } else if (terminated && since(t0) > limit_s + 5) {
      killpg(pid, SIGKILL), killed = true;
    }
  }
  if (terminated || killed) killpg(pid, SIGKILL);  // what the launcher left of its group
  drain(0);
  close(fds[0]);
  r.status = terminated ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = since(t0);
  return r;
}

}  // namespace loom::test
