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
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/system.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"
#include "loom/dsm/runtime/job_dir.hpp"

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }

void usage() {
  std::fprintf(stderr,
               "usage: loomrun -n N [--threads T] [--provider shm] [--timeout SECONDS] [--no-prefix] [--] program [args...]\n"
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
  int stop_signal = 0;  // the signal that stopped it, while it is stopped
  std::chrono::steady_clock::time_point stopped_at;
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

struct Options {
  int n = -1;
  std::string threads, provider;
  double timeout_s = 0;  // 0: none
  int64_t stopped_limit_ms = 3000;  // LOOM_STOPPED_LIMIT_MS; 0: a stopped rank is waited for
  bool prefix = true;
  int program = 0;  // argv index of the program
};

[[noreturn]] void bad_usage(const std::string& why) {
  std::fprintf(stderr, "loomrun: %s\n", why.c_str());
  usage();
  std::exit(2);
}

// A positive number of seconds; anything else (text, a sign, nan, inf, 0) is refused.
double parse_timeout(const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x <= 0)
    bad_usage("--timeout '" + v + "' must be a positive number of seconds");
  return x;
}

int parse_count(const std::string& v) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 1 || x > 1024) bad_usage("-n '" + v + "' must be 1..1024");
  return static_cast<int>(x);
}

Options parse_options(int argc, char** argv) {
  Options o;
  int i = 1;
  auto value = [&](const char* what) -> std::string {
    if (i + 1 >= argc) bad_usage(std::string(what) + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-n" || a == "-np") o.n = parse_count(value("-n"));
    else if (a == "--threads") o.threads = value("--threads");
    else if (a == "--provider") o.provider = value("--provider");
    else if (a == "--timeout") o.timeout_s = parse_timeout(value("--timeout"));
    else if (a == "--no-prefix") o.prefix = false;
    else if (a == "-h" || a == "--help") usage(), std::exit(0);
    else if (a == "--") { ++i; break; }  // the program follows, even if it starts with '-'
    else if (!a.empty() && a[0] == '-') bad_usage("unknown option " + a);
    else break;
  }
  if (o.n < 0) bad_usage("-n is required");
  if (i >= argc) bad_usage("no program to run");
  o.program = i;
  return o;
}

// The job directory (held until this process ends, so no other job's sweep takes it for
// abandoned) and the embedded bootstrap's file in it.
bool set_up_job(int n, std::string& job_id, std::string& job_dir) {
  loom::runtime::sweep_stale_job_dirs();  // left by launchers that were killed
  if (loom::runtime::create_new_job_dir(job_id, job_dir) < 0) {
    std::fprintf(stderr, "loomrun: cannot create job directory %s: %s\n", job_dir.c_str(), std::strerror(errno));
    return false;
  }
  std::string boot = job_dir + "/boot";
  int fd = open(boot.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const size_t bytes = loom::runtime::EmbeddedBootstrap::file_size(n);
  int err = fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? errno : loom::sys::reserve_file_space(fd, 0, bytes);
  if (err != 0) {
    std::fprintf(stderr, "loomrun: cannot create %s: %s\n", boot.c_str(),
                 loom::sys::no_room_message("the bootstrap file", job_dir, bytes, err).c_str());
    if (fd >= 0) close(fd);
    loom::runtime::remove_job_dir(job_dir, job_id);
    return false;
  }
  close(fd);
  return true;
}

void catch_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// In the child: its own process group (ending the job also ends whatever it started), dies
// with the launcher, output to the pipes, the job's variables, then the program.
[[noreturn]] void exec_rank(const Options& o, char** argv, int r, const std::string& job_id, const std::string& job_dir,
                            pid_t launcher, int out_fd, int err_fd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(127);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  setenv("LOOM_RANK", std::to_string(r).c_str(), 1);
  setenv("LOOM_SIZE", std::to_string(o.n).c_str(), 1);
  setenv("LOOM_LOCAL_RANK", std::to_string(r).c_str(), 1);
  setenv("LOOM_LOCAL_SIZE", std::to_string(o.n).c_str(), 1);
  setenv("LOOM_JOB_ID", job_id.c_str(), 1);
  setenv("LOOM_JOB_DIR", job_dir.c_str(), 1);
  if (!o.threads.empty()) setenv("LOOM_THREADS", o.threads.c_str(), 1);
  if (!o.provider.empty()) setenv("LOOM_PROVIDER", o.provider.c_str(), 1);
  signal(SIGPIPE, SIG_DFL);
  execvp(argv[o.program], argv + o.program);
  std::fprintf(stderr, "loomrun: cannot execute %s: %s\n", argv[o.program], std::strerror(errno));
  _exit(127);
}

bool start_ranks(const Options& o, char** argv, const std::string& job_id, const std::string& job_dir, std::vector<Child>& kids) {
  const pid_t launcher = getpid();
  kids.resize(static_cast<size_t>(o.n));
  for (int r = 0; r < o.n; ++r) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return std::perror("loomrun: pipe"), false;
    pid_t pid = fork();
    if (pid < 0) return std::perror("loomrun: fork"), false;
    if (pid == 0) exec_rank(o, argv, r, job_id, job_dir, launcher, out[1], err[1]);
    setpgid(pid, pid);  // also here: no race with the child's own call
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    kids[static_cast<size_t>(r)] = Child{r, pid, out[0], err[0], {}, {}, true, 0, 0, {}};
  }
  return true;
}

// Watches the ranks: relays their output, and ends the whole job when one fails, a signal
// arrives or the timeout passes (SIGTERM to every rank's group, SIGKILL half a second later).
class Supervisor {
 public:
  Supervisor(const Options& o, std::vector<Child>& kids) : o_(o), kids_(kids), running_(o.n) {}

  int run() {
    while (running_ > 0 || output_open()) {
      relay_output();
      reap();
      check_stopped();
      if (g_signal != 0 && !terminating_) {
        std::fprintf(stderr, "loomrun: received signal %d; terminating the job\n", static_cast<int>(g_signal));
        end_job(128 + g_signal);
      }
      if (o_.timeout_s > 0 && !terminating_ && std::chrono::duration<double>(clock::now() - start_).count() > o_.timeout_s) {
        std::fprintf(stderr, "loomrun: the job exceeded --timeout %.1f s; terminating it\n", o_.timeout_s);
        end_job(124);
      }
      // Processes that ignore SIGTERM (or sleep in a futex) get SIGKILL after half a second.
      if (terminating_ && running_ > 0 && clock::now() - term_at_ > std::chrono::milliseconds(500)) signal_all(SIGKILL);
      // A killed child's grandchildren may hold its pipes open; stop reading once all have exited.
      if (running_ == 0 && terminating_ && clock::now() - term_at_ > std::chrono::seconds(1)) break;
    }
    for (auto& k : kids_) {
      emit(k.rank, k.out_buf, stdout, o_.prefix, true);
      emit(k.rank, k.err_buf, stderr, o_.prefix, true);
    }
    return exit_code_;
  }

 private:
  using clock = std::chrono::steady_clock;

  bool output_open() const {
    return std::any_of(kids_.begin(), kids_.end(), [](const Child& k) { return k.out_fd >= 0 || k.err_fd >= 0; });
  }

  void relay_output() {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> who;
    for (size_t k = 0; k < kids_.size(); ++k) {
      if (kids_[k].out_fd >= 0) fds.push_back({kids_[k].out_fd, POLLIN, 0}), who.emplace_back(k, 1);
      if (kids_[k].err_fd >= 0) fds.push_back({kids_[k].err_fd, POLLIN, 0}), who.emplace_back(k, 2);
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 20);
    else usleep(20000);
    for (size_t f = 0; f < fds.size(); ++f) {
      if (fds[f].revents == 0) continue;
      Child& k = kids_[who[f].first];
      if (who[f].second == 1) while (drain(k.out_fd, k.rank, k.out_buf, stdout, o_.prefix)) {}
      else while (drain(k.err_fd, k.rank, k.err_buf, stderr, o_.prefix)) {}
    }
  }

  void reap() {
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED)) > 0) {
      for (auto& k : kids_) {
        if (k.pid != p || !k.running) continue;
        if (WIFSTOPPED(st) || WIFCONTINUED(st)) {
          k.stop_signal = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
          k.stopped_at = clock::now();
          continue;
        }
        k.running = false;
        k.status = st;
        --running_;
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !terminating_) rank_failed(k, st);
      }
    }
  }

  // A rank stopped (SIGSTOP, SIGTSTP, ...) is alive but its peers would wait for it forever.
  void check_stopped() {
    if (terminating_ || o_.stopped_limit_ms == 0) return;
    for (auto& k : kids_) {
      if (!k.running || k.stop_signal == 0) continue;
      if (clock::now() - k.stopped_at < std::chrono::milliseconds(o_.stopped_limit_ms)) continue;
      std::fprintf(stderr, "loomrun: rank %d (pid %d) was stopped by signal %d (%s) for %.1f s (LOOM_STOPPED_LIMIT_MS); terminating the job\n",
                   k.rank, k.pid, k.stop_signal, strsignal(k.stop_signal), static_cast<double>(o_.stopped_limit_ms) / 1000);
      end_job(128 + k.stop_signal);
      return;
    }
  }

  void rank_failed(const Child& k, int st) {
    if (WIFEXITED(st)) {
      std::fprintf(stderr, "loomrun: rank %d (pid %d) exited with status %d; terminating the job\n", k.rank, k.pid, WEXITSTATUS(st));
      end_job(WEXITSTATUS(st));
    } else {
      std::fprintf(stderr, "loomrun: rank %d (pid %d) was killed by signal %d (%s); terminating the job\n", k.rank, k.pid,
                   WTERMSIG(st), strsignal(WTERMSIG(st)));
      end_job(128 + WTERMSIG(st));
    }
  }

  void end_job(int code) {
    std::fflush(stderr);
    exit_code_ = code;
    terminating_ = true;
    term_at_ = clock::now();
    signal_all(SIGTERM);
    signal_all(SIGCONT);  // a stopped rank takes its SIGTERM only once continued
  }

  void signal_all(int sig) {
    for (auto& k : kids_) kill(-k.pid, sig);  // the rank's group: it and anything it started
  }

  const Options& o_;
  std::vector<Child>& kids_;
  int running_;
  int exit_code_ = 0;
  bool terminating_ = false;
  const clock::time_point start_ = clock::now();
  clock::time_point term_at_;
};

int run_job(Options o, char** argv) {
  o.stopped_limit_ms = loom::settings::get_int(loom::settings::dsm::kStoppedLimit);
  std::string job_id, job_dir;
  if (!set_up_job(o.n, job_id, job_dir)) return 1;
  catch_signals();
  std::vector<Child> kids;
  int code = 1;
  if (start_ranks(o, argv, job_id, job_dir, kids)) code = Supervisor(o, kids).run();
  loom::runtime::remove_job_dir(job_dir, job_id);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  try {
    return run_job(o, argv);
  } catch (const std::exception& e) {
    // A bad setting (LOOM_SWEEP, LOOM_SHM_DIR, ...) before any rank started.
    std::fprintf(stderr, "loomrun: %s\n", e.what());
    return 2;
  }
}
