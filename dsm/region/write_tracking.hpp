#pragma once
// How the kernel can tell Loom which pages of a region were written (docs/coherence.md,
// "Write tracking"). Regions track writes with SIGSEGV and mprotect: a write to a read-only
// block faults and the handler twins it. Linux >= 6.7 can instead write-protect a range
// through userfaultfd in asynchronous mode — a write then proceeds without a signal and the
// page is marked written — and report (and re-protect) the written pages with one PAGEMAP_SCAN
// ioctl. AsyncWriteProtect wraps that for measurement (bench_write_tracking) and for loom-info.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::region {

// What this kernel offers: whether asynchronous userfaultfd write protection with PAGEMAP_SCAN
// works on shared memory like a region's, and if not, why (the failing call and its error).
struct KernelWriteTracking {
  bool uffd_wp_async = false;
  std::string why_not;
};
KernelWriteTracking probe_kernel_write_tracking();

// The mechanism regions use for their writes, as loom-info and Space::stats name it.
inline constexpr const char* kWriteTrackingInUse = "sigsegv";

// Asynchronous write protection of [base, base+len) (page aligned, shared or private memory).
// Throws SystemError naming the call that failed when the kernel lacks the feature.
class AsyncWriteProtect {
 public:
  AsyncWriteProtect(void* base, size_t len);
  ~AsyncWriteProtect();
  AsyncWriteProtect(const AsyncWriteProtect&) = delete;
  AsyncWriteProtect& operator=(const AsyncWriteProtect&) = delete;

  // Write-protects the whole range (writes after this are recorded).
  void protect_all();
  // The pages written since they were last protected, as [start, end) byte ranges, and
  // write-protects them again, in one ioctl per batch of ranges.
  std::vector<std::pair<uintptr_t, uintptr_t>> take_written();

 private:
  uintptr_t base_;
  size_t len_;
  int uffd_ = -1;
  int pagemap_ = -1;
};

}  // namespace loom::region
