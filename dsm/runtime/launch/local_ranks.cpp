// Starting and supervising the ranks on this host.
#include "loom/dsm/runtime/launch/local_ranks.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/system.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"
#include "loom/dsm/runtime/job_dir.hpp"

namespace loom::runtime::launch {

struct LocalRanks::Child {
  int rank = 0;
  pid_t pid = -1;
  int fd[3] = {-1, -1, -1};  // [1] stdout, [2] stderr
  std::string buf[3];
  bool running = true;
  int stop_signal = 0;  // the signal that stopped it, while it is stopped
  Clock::time_point stopped_at;
};

namespace {

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

FILE* stream(int which) { return which == 1 ? stdout : stderr; }

}  // namespace

LocalRanks::LocalRanks(const Options& o, char** argv) : o_(o), argv_(argv) {
  stopped_limit_ms_ = settings::get_int(settings::dsm::kStoppedLimit);
}

LocalRanks::~LocalRanks() {
  for (auto& k : kids_)
    for (int w : {1, 2})
      if (k.fd[w] >= 0) ::close(k.fd[w]);
  if (!job_dir_.empty()) remove_job_dir(job_dir_, job_id_);
}

bool LocalRanks::set_up(const Placement& p) {
  place_ = p;
  sweep_stale_job_dirs();  // left by launchers that were killed
  if (create_new_job_dir(job_id_, job_dir_) < 0) {
    std::fprintf(stderr, "loomrun: cannot create job directory %s: %s\n", job_dir_.c_str(), std::strerror(errno));
    job_dir_.clear();
    return false;
  }
  const std::string boot = job_dir_ + "/boot";
  const int fd = ::open(boot.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const size_t bytes = EmbeddedBootstrap::file_size(p.size);
  const int err = fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? errno : sys::reserve_file_space(fd, 0, bytes);
  if (fd >= 0) ::close(fd);
  if (err != 0) {
    std::fprintf(stderr, "loomrun: cannot create %s: %s\n", boot.c_str(),
                 sys::no_room_message("the bootstrap file", job_dir_, bytes, err).c_str());
    return false;
  }
  return true;
}

bool LocalRanks::start() {
  const pid_t launcher = getpid();
  kids_.resize(static_cast<size_t>(o_.n));
  for (int i = 0; i < o_.n; ++i) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return std::perror("loomrun: pipe"), false;
    const pid_t pid = fork();
    if (pid < 0) return std::perror("loomrun: fork"), false;
    const int rank = place_.first_rank + i;
    if (pid == 0) {
      // The child: its own process group (ending the job also ends whatever it started), dies
      // with the launcher, output to the pipes, the job's variables, then the program.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(127);
      dup2(out[1], 1);
      dup2(err[1], 2);
      setenv("LOOM_RANK", std::to_string(rank).c_str(), 1);
      setenv("LOOM_SIZE", std::to_string(place_.size).c_str(), 1);
      setenv("LOOM_LOCAL_RANK", std::to_string(i).c_str(), 1);
      setenv("LOOM_LOCAL_SIZE", std::to_string(o_.n).c_str(), 1);
      setenv("LOOM_JOB_ID", job_id_.c_str(), 1);
      setenv("LOOM_JOB_DIR", job_dir_.c_str(), 1);
      if (place_.nodes > 1) {
        setenv("LOOM_NODE", std::to_string(place_.node).c_str(), 1);
        setenv("LOOM_NODES", std::to_string(place_.nodes).c_str(), 1);
        if (i == 0 && place_.leader_fd >= 0) {
          // The leader's link to this launcher survives the exec; nobody else gets it.
          fcntl(place_.leader_fd, F_SETFD, 0);
          setenv("LOOM_BOOT_FD", std::to_string(place_.leader_fd).c_str(), 1);
        }
      }
      if (!o_.threads.empty()) setenv("LOOM_THREADS", o_.threads.c_str(), 1);
      if (!o_.provider.empty()) setenv("LOOM_PROVIDER", o_.provider.c_str(), 1);
      if (!o_.map_by.empty()) setenv("LOOM_MAP_BY", o_.map_by.c_str(), 1);
      if (o_.emulate_nodes > 0) setenv("LOOM_EMULATE_NODES", std::to_string(o_.emulate_nodes).c_str(), 1);
      signal(SIGPIPE, SIG_DFL);
      if (o_.same_layout && personality(static_cast<unsigned long>(personality(0xffffffff)) | ADDR_NO_RANDOMIZE) == -1) {
        std::fprintf(stderr, "loomrun: --same-layout: cannot turn address randomization off: %s\n", std::strerror(errno));
        _exit(127);
      }
      execvp(argv_[o_.program], argv_ + o_.program);
      std::fprintf(stderr, "loomrun: cannot execute %s: %s\n", argv_[o_.program], std::strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);  // also here: no race with the child's own call
    ::close(out[1]);
    ::close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    Child& k = kids_[static_cast<size_t>(i)];
    k.rank = rank;
    k.pid = pid;
    k.fd[1] = out[0];
    k.fd[2] = err[0];
    ++running_;
  }
  return true;
}

void LocalRanks::add_to(PollSet& ps) {
  for (auto& k : kids_)
    for (int w : {1, 2})
      if (k.fd[w] >= 0) ps.add(k.fd[w], POLLIN, [this, &k, w](short) { relay(k, w); });
}

void LocalRanks::relay(Child& k, int which) {
  char tmp[8192];
  for (;;) {
    const ssize_t n = ::read(k.fd[which], tmp, sizeof tmp);
    if (n > 0) {
      k.buf[which].append(tmp, static_cast<size_t>(n));
      emit(k.rank, k.buf[which], stream(which), o_.prefix, false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno != EAGAIN) {
      ::close(k.fd[which]);
      k.fd[which] = -1;
      emit(k.rank, k.buf[which], stream(which), o_.prefix, true);
    }
    return;
  }
}

std::string LocalRanks::who(const Child& k) const {
  std::string s = "rank " + std::to_string(k.rank) + " (pid " + std::to_string(k.pid);
  if (place_.nodes > 1) s += " on " + place_.host;
  return s + ")";
}

void LocalRanks::note_end(Child& k, int st) {
  k.running = false;
  --running_;
  if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || terminating_ || failure_) return;
  if (WIFEXITED(st)) {
    failure_ = Status{WEXITSTATUS(st), who(k) + " exited with status " + std::to_string(WEXITSTATUS(st))};
  } else {
    failure_ = Status{128 + WTERMSIG(st), who(k) + " was killed by signal " + std::to_string(WTERMSIG(st)) + " (" +
                                              strsignal(WTERMSIG(st)) + ")"};
  }
}

void LocalRanks::tick() {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED)) > 0) {
    for (auto& k : kids_) {
      if (k.pid != p || !k.running) continue;
      if (WIFSTOPPED(st) || WIFCONTINUED(st)) {
        k.stop_signal = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
        k.stopped_at = Clock::now();
      } else {
        note_end(k, st);
      }
    }
  }
  check_stopped();
  // Processes that ignore SIGTERM (or sleep in a futex) get SIGKILL after half a second.
  if (terminating_ && running_ > 0 && Clock::now() - term_at_ > std::chrono::milliseconds(500)) signal_all(SIGKILL);
}

// A rank stopped (SIGSTOP, SIGTSTP, ...) is alive but its peers would wait for it forever.
void LocalRanks::check_stopped() {
  if (terminating_ || failure_ || stopped_limit_ms_ == 0) return;
  for (auto& k : kids_) {
    if (!k.running || k.stop_signal == 0) continue;
    if (Clock::now() - k.stopped_at < std::chrono::milliseconds(stopped_limit_ms_)) continue;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", static_cast<double>(stopped_limit_ms_) / 1000);
    failure_ = Status{128 + k.stop_signal, who(k) + " was stopped by signal " + std::to_string(k.stop_signal) + " (" +
                                               strsignal(k.stop_signal) + ") for " + secs + " s (LOOM_STOPPED_LIMIT_MS)"};
    return;
  }
}

std::optional<Status> LocalRanks::take_failure() {
  if (!failure_ || failure_taken_) return std::nullopt;
  failure_taken_ = true;
  return failure_;
}

void LocalRanks::terminate(int code) {
  if (terminating_) return;
  std::fflush(stderr);
  code_ = code;
  terminating_ = true;
  term_at_ = Clock::now();
  signal_all(SIGTERM);
  signal_all(SIGCONT);  // a stopped rank takes its SIGTERM only once continued
}

void LocalRanks::signal_all(int sig) {
  for (auto& k : kids_)
    if (k.pid > 0) kill(-k.pid, sig);  // the rank's group: it and anything it started
}

bool LocalRanks::output_open() const {
  return std::any_of(kids_.begin(), kids_.end(), [](const Child& k) { return k.fd[1] >= 0 || k.fd[2] >= 0; });
}

bool LocalRanks::finished() const {
  if (running_ > 0) return false;
  return !output_open() || (terminating_ && Clock::now() - term_at_ > std::chrono::seconds(1));
}

void LocalRanks::flush_output() {
  for (auto& k : kids_)
    for (int w : {1, 2}) emit(k.rank, k.buf[w], stream(w), o_.prefix, true);
}

}  // namespace loom::runtime::launch
