#include "loom/dsm/runtime/job_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/system.hpp"

namespace loom::runtime {

std::string shm_root() { return settings::get_string(settings::dsm::kShmDir); }

std::vector<std::string> hugetlbfs_job_dirs(const std::string& job_id) {
  std::vector<std::string> out;
  for (const std::string& mount : sys::hugetlbfs_mounts()) out.push_back(mount + "/loom-" + job_id);
  return out;
}

bool remove_job_dir(const std::string& dir, const std::string& job_id) {
  std::error_code ec, huge_ec;
  std::filesystem::remove_all(dir, ec);
  for (const auto& h : hugetlbfs_job_dirs(job_id)) std::filesystem::remove_all(h, huge_ec);
  return !ec;
}

namespace {
// For `loom-<pid>-<random>` (loomrun's and a lone program's names): whether that process still
// runs. A second condition besides the lock, for directories of Loom versions that took no
// lock; a reused pid only delays a sweep. Other names (PMIx jobs) count as gone.
bool namer_alive(const std::string& name) {
  size_t dash = name.find('-', 5);
  if (dash == std::string::npos || dash == 5) return false;
  pid_t pid = 0;
  for (size_t i = 5; i < dash; ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 100000000) return false;
    pid = pid * 10 + (name[i] - '0');
  }
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
  // A killed process nobody has reaped yet (a zombie) still answers kill(): it is gone as well.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');  // the command name may contain spaces and parentheses
  return !(paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X'));
}

// The directory is still linked: a sweep that removed it between our open and our lock leaves
// us holding an unlinked directory.
bool still_there(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_nlink > 0;
}
}  // namespace

int hold_job_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  std::string why;
  if (!sys::is_private_dir(fd, &why)) {
    // In a world-writable /dev/shm another user could have made it first.
    log::error("job directory ", dir, " is ", why, "; not used");
    ::close(fd);
    errno = EPERM;
    return -1;
  }
  int r;
  while ((r = flock(fd, LOCK_SH)) != 0 && errno == EINTR) {
  }
  if (r != 0 || !still_there(fd)) {
    int why = r != 0 ? errno : ENOENT;  // ENOENT: a sweep removed it before the hold
    ::close(fd);
    errno = why;
    return -1;
  }
  return fd;
}

int create_job_dir(const std::string& dir, bool may_exist) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (mkdir(dir.c_str(), 0700) != 0 && !(may_exist && errno == EEXIST)) return -1;
    int fd = hold_job_dir(dir);
    if (fd >= 0 || !may_exist || errno != ENOENT) return fd;
  }
  return -1;
}

int create_new_job_dir(std::string& job_id, std::string& dir) {
  std::random_device rd;
  // A name is retried only if a sweep took the directory between its creation and the hold.
  for (int attempt = 0; attempt < 3; ++attempt) {
    char id[48];
    std::snprintf(id, sizeof id, "%d-%08x", static_cast<int>(getpid()), rd());
    job_id = id;
    dir = shm_root() + "/loom-" + job_id;
    int fd = create_job_dir(dir);
    if (fd >= 0 || errno != ENOENT) return fd;
  }
  return -1;
}

std::vector<std::string> sweep_stale_job_dirs() {
  std::vector<std::string> removed;
  if (!settings::get_bool(settings::dsm::kSweep)) return removed;
  const std::string root = shm_root();
  DIR* d = opendir(root.c_str());
  if (d == nullptr) return removed;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("loom-", 0) != 0) continue;
    const std::string path = root + "/" + name;
    // Not followed if it is a link: only real directories of this user are candidates.
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || namer_alive(name)) {
      if (fd >= 0) ::close(fd);
      continue;
    }
    struct stat st;
    // A job's own processes hold it shared; an exclusive lock granted now means none is left.
    // The lock is kept while removing, so a process that opened the directory meanwhile waits
    // and then finds it unlinked (hold_job_dir).
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == me && st.st_nlink > 0 &&
        flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (remove_job_dir(path, name.substr(5))) {
        removed.push_back(path);
        log::warn("removed ", path, ": a job that ended without cleaning up left it behind (LOOM_SWEEP=0 keeps such directories)");
      }
    }
    ::close(fd);
  }
  closedir(d);
  return removed;
}

}  // namespace loom::runtime
