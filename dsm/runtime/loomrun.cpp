// loomrun: starts N processes of one program on this host, bootstraps them through a per-job
// shared-memory directory, prefixes their output with the rank, and ends the whole job as soon
// as one process fails. It cleans the job's segments up however the job ends.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dsm/runtime/bootstrap.hpp"
#include "dsm/runtime/job_dir.hpp"

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }

void usage() {
  std::fprintf(stderr,
               "usage: loomrun -n N [--threads T] [--provider shm] [--timeout SECONDS] [--no-prefix] program [args...]\n"
               "  -n N            number of processes (1..1024)\n"
               "  --threads T     worker threads per process (sets LOOM_THREADS)\n"
               "  --provider P    fabric provider (sets LOOM_PROVIDER; default shm)\n"
               "  --timeout S     end the job with an error after S seconds\n"
               "  --no-prefix     do not prefix output lines with [rank]\n");
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out_buf, err_buf;
  bool running = true;
  int status = 0;
};

void emit(int rank, std::string& buf, FILE* to, bool prefix, bool final) {
  size_t pos;
  while ((pos = buf.find('\n')) != std::string::npos) {
    if (prefix) std::fprintf(to, "[%d] %.*s\n", rank, static_cast<int>(pos), buf.data());
    else std::fprintf(to, "%.*s\n", static_cast<int>(pos), buf.data());
    buf.erase(0, pos + 1);
  }
  if (final && !buf.empty()) {
    if (prefix) std::fprintf(to, "[%d] %s\n", rank, buf.c_str());
    else std::fprintf(to, "%s\n", buf.c_str());
    buf.clear();
  }
  std::fflush(to);
}

bool drain(int& fd, int rank, std::string& buf, FILE* to, bool prefix) {
  if (fd < 0) return false;
  char tmp[8192];
  ssize_t n = read(fd, tmp, sizeof tmp);
  if (n > 0) {
    buf.append(tmp, static_cast<size_t>(n));
    emit(rank, buf, to, prefix, false);
    return true;
  }
  if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    close(fd);
    fd = -1;
    emit(rank, buf, to, prefix, true);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int n = -1;
  std::string threads, provider;
  double timeout_s = 0;
  bool prefix = true;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto need = [&](const char* what) -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "loomrun: %s needs a value\n", what); usage(); std::exit(2); }
      return argv[++i];
    };
    if (a == "-n" || a == "-np") {
      std::string v = need("-n");
      char* end = nullptr;
      long x = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || x < 1 || x > 1024) { std::fprintf(stderr, "loomrun: -n '%s' must be 1..1024\n", v.c_str()); return 2; }
      n = static_cast<int>(x);
    } else if (a == "--threads") {
      threads = need("--threads");
    } else if (a == "--provider") {
      provider = need("--provider");
    } else if (a == "--timeout") {
      timeout_s = std::atof(need("--timeout").c_str());
    } else if (a == "--no-prefix") {
      prefix = false;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "loomrun: unknown option %s\n", a.c_str());
      usage();
      return 2;
    } else {
      break;
    }
  }
  if (n < 0 || i >= argc) { usage(); return 2; }

  // Directories of jobs whose launcher was killed before it could remove them.
  loom::runtime::sweep_stale_job_dirs();
  std::string job_id, job_dir;
  // Held until this process ends, so that no other job's sweep takes it for abandoned.
  if (loom::runtime::create_new_job_dir(job_id, job_dir) < 0) {
    std::fprintf(stderr, "loomrun: cannot create job directory %s: %s\n", job_dir.c_str(), std::strerror(errno));
    return 1;
  }
  auto cleanup = [&] { loom::runtime::remove_job_dir(job_dir, job_id); };
  {
    std::string boot = job_dir + "/boot";
    int fd = open(boot.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(loom::runtime::EmbeddedBootstrap::file_size(n))) != 0) {
      std::fprintf(stderr, "loomrun: cannot create %s: %s\n", boot.c_str(), std::strerror(errno));
      cleanup();
      return 1;
    }
    close(fd);
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<Child> kids(static_cast<size_t>(n));
  const pid_t launcher = getpid();
  for (int r = 0; r < n; ++r) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      std::perror("loomrun: pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) { std::perror("loomrun: fork"); return 1; }
    if (pid == 0) {
      // Each rank leads its own process group, so ending the job also ends whatever it started.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(127);
      dup2(out[1], 1);
      dup2(err[1], 2);
      setenv("LOOM_RANK", std::to_string(r).c_str(), 1);
      setenv("LOOM_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOOM_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOOM_LOCAL_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOOM_JOB_ID", job_id.c_str(), 1);
      setenv("LOOM_JOB_DIR", job_dir.c_str(), 1);
      if (!threads.empty()) setenv("LOOM_THREADS", threads.c_str(), 1);
      if (!provider.empty()) setenv("LOOM_PROVIDER", provider.c_str(), 1);
      signal(SIGPIPE, SIG_DFL);
      execvp(argv[i], argv + i);
      std::fprintf(stderr, "loomrun: cannot execute %s: %s\n", argv[i], std::strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);  // also here: no race with the child's own call
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    kids[static_cast<size_t>(r)] = Child{r, pid, out[0], err[0], {}, {}, true, 0};
  }

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int exit_code = 0;
  bool terminating = false;
  clock::time_point term_at;
  int running = n;
  auto terminate_all = [&](int sig) {
    for (auto& k : kids) kill(-k.pid, sig);  // the rank's group: it and anything it started
  };

  while (running > 0 || std::any_of(kids.begin(), kids.end(), [](const Child& k) { return k.out_fd >= 0 || k.err_fd >= 0; })) {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> who;
    for (size_t k = 0; k < kids.size(); ++k) {
      if (kids[k].out_fd >= 0) { fds.push_back({kids[k].out_fd, POLLIN, 0}); who.emplace_back(k, 1); }
      if (kids[k].err_fd >= 0) { fds.push_back({kids[k].err_fd, POLLIN, 0}); who.emplace_back(k, 2); }
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 20);
    else usleep(20000);
    for (size_t f = 0; f < fds.size(); ++f) {
      if (fds[f].revents == 0) continue;
      Child& k = kids[who[f].first];
      if (who[f].second == 1) while (drain(k.out_fd, k.rank, k.out_buf, stdout, prefix)) {}
      else while (drain(k.err_fd, k.rank, k.err_buf, stderr, prefix)) {}
    }
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
      for (auto& k : kids) {
        if (k.pid != p || !k.running) continue;
        k.running = false;
        k.status = st;
        --running;
        bool bad = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (bad && !terminating) {
          if (WIFEXITED(st)) {
            std::fprintf(stderr, "loomrun: rank %d (pid %d) exited with status %d; terminating the job\n", k.rank, k.pid, WEXITSTATUS(st));
            exit_code = WEXITSTATUS(st);
          } else {
            std::fprintf(stderr, "loomrun: rank %d (pid %d) was killed by signal %d (%s); terminating the job\n", k.rank, k.pid,
                         WTERMSIG(st), strsignal(WTERMSIG(st)));
            exit_code = 128 + WTERMSIG(st);
          }
          std::fflush(stderr);
          terminating = true;
          term_at = clock::now();
          terminate_all(SIGTERM);
        }
      }
    }
    if (g_signal != 0 && !terminating) {
      std::fprintf(stderr, "loomrun: received signal %d; terminating the job\n", static_cast<int>(g_signal));
      exit_code = 128 + g_signal;
      terminating = true;
      term_at = clock::now();
      terminate_all(SIGTERM);
    }
    if (timeout_s > 0 && !terminating && std::chrono::duration<double>(clock::now() - start).count() > timeout_s) {
      std::fprintf(stderr, "loomrun: the job exceeded --timeout %.1f s; terminating it\n", timeout_s);
      exit_code = 124;
      terminating = true;
      term_at = clock::now();
      terminate_all(SIGTERM);
    }
    // Processes that ignore SIGTERM (or sleep in a futex) get SIGKILL after half a second.
    if (terminating && running > 0 && clock::now() - term_at > std::chrono::milliseconds(500)) terminate_all(SIGKILL);
    // A killed child's grandchildren may hold its pipes open; stop reading once all have exited.
    if (running == 0 && terminating && clock::now() - term_at > std::chrono::seconds(1)) break;
  }
  for (auto& k : kids) {
    emit(k.rank, k.out_buf, stdout, prefix, true);
    emit(k.rank, k.err_buf, stderr, prefix, true);
  }
  cleanup();
  return exit_code;
}
