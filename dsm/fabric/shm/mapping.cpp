// Mapped files (shared segments) and the hugetlbfs mount they may live on.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/system.hpp"
#include "loom/dsm/fabric/shm/shm_internal.hpp"
#include "loom/dsm/fabric/shm/shm_provider.hpp"

namespace loom::fabric::shm {

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) munmap(addr_, len_);
    addr_ = o.addr_;
    len_ = o.len_;
    o.addr_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}

Mapping::~Mapping() {
  if (addr_ != nullptr) munmap(addr_, len_);
}

Mapping Mapping::create(const std::string& path, size_t len, Reserve reserve) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail_errno("cannot create shared segment " + path);
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    throw SystemError("cannot size shared segment " + path, e);
  }
  if (int e = reserve == Reserve::All ? sys::reserve_file_space(fd, 0, len) : 0; e != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    auto slash = path.rfind('/');
    fail(sys::no_room_message("shared segment " + path.substr(slash + 1), path.substr(0, slash), len, e));
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::unlink(path.c_str());
    throw SystemError("cannot map shared segment " + path, e);
  }
  return Mapping(p, len);
}

Mapping Mapping::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open shared segment " + path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw SystemError("cannot stat " + path, e);
  }
  size_t len = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw SystemError("cannot map " + path, e);
  return Mapping(p, len);
}

Mapping Mapping::open_or_create(const std::string& path, size_t len) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail_errno("cannot open or create shared segment " + path);
  struct stat st;
  // Growing to `len` is the same act from every process; a file already that long is kept.
  if (fstat(fd, &st) != 0 || (static_cast<size_t>(st.st_size) < len && ftruncate(fd, static_cast<off_t>(len)) != 0)) {
    int e = errno;
    ::close(fd);
    throw SystemError("cannot size shared segment " + path, e);
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw SystemError("cannot map " + path, e);
  return Mapping(p, len);
}

std::string find_hugetlbfs() {
  std::vector<std::string> mounts = sys::hugetlbfs_mounts();
  if (mounts.empty()) return {};
  std::ifstream f("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  long free_pages = 0;
  f >> free_pages;
  return free_pages > 0 ? mounts.front() : std::string();
}

}  // namespace loom::fabric::shm
