#include "loom/dsm/region/write_tracking.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::region {

namespace {
// Linux 6.7 ABI (include/uapi/linux/userfaultfd.h, fs.h); Debian 12's headers predate it.
constexpr uint64_t kFeatureWpHugetlbfsShmem = uint64_t{1} << 12;
constexpr uint64_t kFeatureWpUnpopulated = uint64_t{1} << 13;
constexpr uint64_t kFeatureWpAsync = uint64_t{1} << 15;
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask, category_anyof_mask,
      return_mask;
};
struct PageRegion {
  uint64_t start, end, categories;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr uint64_t kScanWpMatching = 1 << 0, kScanCheckWpAsync = 1 << 1;
constexpr uint64_t kPageIsWritten = 1 << 1;
constexpr size_t kRangesPerScan = 512;
}  // namespace

AsyncWriteProtect::AsyncWriteProtect(void* base, size_t len) : base_(reinterpret_cast<uintptr_t>(base)), len_(len) {
  uffd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (uffd_ < 0) throw SystemError("write tracking: userfaultfd", errno);
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kFeatureWpAsync | kFeatureWpUnpopulated | kFeatureWpHugetlbfsShmem;
  uffdio_register reg{};
  reg.range.start = base_;
  reg.range.len = len_;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  const char* step = nullptr;
  if (ioctl(uffd_, UFFDIO_API, &api) < 0) step = "write tracking: UFFDIO_API with asynchronous write protection";
  else if (ioctl(uffd_, UFFDIO_REGISTER, &reg) < 0) step = "write tracking: UFFDIO_REGISTER (write-protect mode)";
  else if ((pagemap_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) < 0) step = "write tracking: open /proc/self/pagemap";
  if (step != nullptr) {
    const int err = errno;
    close(uffd_);
    throw SystemError(step, err);
  }
}

AsyncWriteProtect::~AsyncWriteProtect() {
  if (pagemap_ >= 0) close(pagemap_);
  if (uffd_ >= 0) close(uffd_);
}

void AsyncWriteProtect::protect_all() {
  uffdio_writeprotect wp{};
  wp.range.start = base_;
  wp.range.len = len_;
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  if (ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp) < 0) throw SystemError("write tracking: UFFDIO_WRITEPROTECT", errno);
}

std::vector<std::pair<uintptr_t, uintptr_t>> AsyncWriteProtect::take_written() {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  PageRegion vec[kRangesPerScan];
  uint64_t from = base_;
  while (from < base_ + len_) {
    PmScanArg s{};
    s.size = sizeof s;
    s.flags = kScanWpMatching | kScanCheckWpAsync;
    s.start = from;
    s.end = base_ + len_;
    s.vec = reinterpret_cast<uintptr_t>(vec);
    s.vec_len = kRangesPerScan;
    s.category_mask = kPageIsWritten;
    s.return_mask = kPageIsWritten;
    const long n = ioctl(pagemap_, kPagemapScan, &s);
    if (n < 0) throw SystemError("write tracking: PAGEMAP_SCAN", errno);
    for (long i = 0; i < n; ++i) out.emplace_back(vec[i].start, vec[i].end);
    if (s.walk_end <= from) break;
    from = s.walk_end;
  }
  return out;
}

KernelWriteTracking probe_kernel_write_tracking() {
  KernelWriteTracking k;
  const size_t len = 2 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const int fd = memfd_create("loom-probe", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) {
    k.why_not = std::string("memfd_create: ") + std::strerror(errno);
    if (fd >= 0) close(fd);
    return k;
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    k.why_not = std::string("mmap: ") + std::strerror(errno);
    return k;
  }
  try {
    AsyncWriteProtect wp(p, len);
    wp.protect_all();
    static_cast<volatile char*>(p)[len / 2] = 1;  // the second page
    const auto written = wp.take_written();
    k.uffd_wp_async = written.size() == 1 && written[0].first == reinterpret_cast<uintptr_t>(p) + len / 2;
    if (!k.uffd_wp_async) k.why_not = "PAGEMAP_SCAN did not report the one page written";
  } catch (const std::exception& e) {
    k.why_not = e.what();
  }
  munmap(p, len);
  return k;
}

}  // namespace loom::region
