// bench_write_tracking: what it costs this machine to learn which pages a program wrote, per
// page, by each mechanism the kernel offers (docs/coherence.md, "Write tracking"), in one run:
//   sigsegv     a write to a read-only page faults; the handler makes it writable (what regions do)
//   mprotect    one mprotect(PROT_READ) over many pages, per page (the batched re-protection)
//   uffd-write  a write to a page under asynchronous userfaultfd write protection (no signal)
//   uffd-scan   PAGEMAP_SCAN reporting and re-protecting the written pages, per page
// Memory is a shared memfd mapping, like a region's. One process; no Loom runtime.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/bench_common.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/region/write_tracking.hpp"

namespace {

constexpr size_t kPages = 4096;
constexpr int kRounds = 5;

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void open_page(int, siginfo_t* si, void*) {
  const long ps = sysconf(_SC_PAGESIZE);
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(si->si_addr) & ~static_cast<uintptr_t>(ps - 1));
  if (mprotect(page, static_cast<size_t>(ps), PROT_READ | PROT_WRITE) != 0) _exit(3);
}

// The best of kRounds, per page, of writing one byte into each of the first `pages` pages.
template <typename Before>
double per_page_write(volatile uint8_t* m, size_t ps, size_t pages, Before&& before) {
  double best = 1e30;
  for (int r = 0; r < kRounds; ++r) {
    before();
    const double t = now_us();
    for (size_t i = 0; i < pages; ++i) m[i * ps] = static_cast<uint8_t>(r + 1);
    best = std::min(best, (now_us() - t) / static_cast<double>(pages));
  }
  return best;
}

}  // namespace

int main() {
  const size_t ps = static_cast<size_t>(sysconf(_SC_PAGESIZE)), len = kPages * ps;
  const int fd = memfd_create("bench-write-tracking", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) loom::fail("memfd: ", std::strerror(errno));
  auto* m = static_cast<uint8_t*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (m == MAP_FAILED) loom::fail("mmap: ", std::strerror(errno));
  std::memset(m, 0, len);

  struct sigaction sa {};
  sa.sa_sigaction = open_page;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, nullptr);
  const double sigsegv = per_page_write(m, ps, kPages, [&] { mprotect(m, len, PROT_READ); });
  double batched = 1e30;
  for (int r = 0; r < kRounds; ++r) {
    mprotect(m, len, PROT_READ | PROT_WRITE);
    const double t = now_us();
    mprotect(m, len, PROT_READ);
    batched = std::min(batched, (now_us() - t) / kPages);
  }
  mprotect(m, len, PROT_READ | PROT_WRITE);
  signal(SIGSEGV, SIG_DFL);

  std::printf("bench_write_tracking: %zu pages of %zu bytes, best of %d (us per page)\n", kPages, ps, kRounds);
  std::printf("%-12s %10s %8s\n", "mechanism", "us/page", "/sigsegv");
  std::printf("%-12s %10.3f %8.2f\n", "sigsegv", sigsegv, 1.0);
  std::printf("%-12s %10.3f %8.2f\n", "mprotect", batched, batched / sigsegv);
  try {
    loom::region::AsyncWriteProtect wp(m, len);
    const double uffd_write = per_page_write(m, ps, kPages, [&] { wp.protect_all(); });
    double scan = 1e30;
    for (int r = 0; r < kRounds; ++r) {
      for (size_t i = 0; i < kPages; ++i) m[i * ps] = static_cast<uint8_t>(r + 7);
      const double t = now_us();
      const auto written = wp.take_written();
      scan = std::min(scan, (now_us() - t) / kPages);
      if (written.empty()) loom::fail("PAGEMAP_SCAN reported no written page");
    }
    std::printf("%-12s %10.3f %8.2f\n", "uffd-write", uffd_write, uffd_write / sigsegv);
    std::printf("%-12s %10.3f %8.2f\n", "uffd-scan", scan, scan / sigsegv);
  } catch (const std::exception& e) {
    std::printf("uffd-write / uffd-scan: not available here (%s)\n", e.what());
  }
  std::printf("load average: %.2f\n", loom::bench::load_average());
  return 0;
}
