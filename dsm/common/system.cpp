#include "loom/dsm/common/system.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fstream>

namespace loom::sys {

std::vector<std::string> hugetlbfs_mounts() {
  std::vector<std::string> out;
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type, rest;
  while (mounts >> dev >> dir >> type) {
    std::getline(mounts, rest);
    if (type == "hugetlbfs") out.push_back(dir);
  }
  return out;
}

bool is_private_dir(int fd, std::string* why) {
  struct stat st;
  std::string w;
  if (fstat(fd, &st) != 0) w = std::string("fstat: ") + std::strerror(errno);
  else if (!S_ISDIR(st.st_mode)) w = "not a directory";
  else if (st.st_uid != geteuid()) w = "owned by uid " + std::to_string(st.st_uid) + ", not by this user";
  else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    w = std::string("group or others have access (mode ") + mode + ")";
  }
  if (w.empty()) return true;
  if (why != nullptr) *why = w;
  return false;
}

bool is_private_dir(const std::string& path, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (why != nullptr) *why = errno == ELOOP || errno == ENOTDIR ? "not a directory (a symlink or a file)" : std::strerror(errno);
    return false;
  }
  bool ok = is_private_dir(fd, why);
  ::close(fd);
  return ok;
}

int reserve_file_space(int fd, size_t offset, size_t len) {
  int r;
  do {
    r = ::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(len));
  } while (r != 0 && errno == EINTR);
  if (r == 0 || errno == EOPNOTSUPP) return 0;
  return errno;
}

std::string no_room_message(const std::string& what, const std::string& dir, size_t len, int err) {
  std::string msg = "cannot reserve " + std::to_string(len) + " bytes for " + what + " in " + dir + ": " + std::strerror(err);
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) == 0)
    msg += " (" + std::to_string(static_cast<unsigned long long>(v.f_bavail) * v.f_frsize) + " bytes free there)";
  if (err == ENOSPC)
    msg += "; the shared-memory file system is full: give it more room (docker run --shm-size, mount -o remount,size=), "
           "point LOOM_SHM_DIR at a larger tmpfs, or use less memory";
  return msg;
}

}  // namespace loom::sys
