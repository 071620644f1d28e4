#include "loom/dsm/runtime/bootstrap.hpp"
#include "loom/dsm/runtime/bootstrap_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/job_dir.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/futex.hpp"
#ifdef LOOM_HAVE_PMIX
#include "loom/dsm/runtime/pmix_bootstrap.hpp"
#endif

namespace loom::runtime {

namespace {
constexpr uint64_t presence_word(pid_t pid, bool left) { return (static_cast<uint64_t>(static_cast<uint32_t>(pid)) << 1) | (left ? 1u : 0u); }
}  // namespace

size_t EmbeddedBootstrap::file_size(int n) {
  size_t header = sizeof(Header) + 3 * sizeof(std::atomic<uint64_t>) * static_cast<size_t>(n);
  header = (header + 4095) & ~size_t{4095};
  return header + kSlotBytes * static_cast<size_t>(n);
}

EmbeddedBootstrap::EmbeddedBootstrap() {
  auto rank = settings::raw(settings::dsm::kRank);
  std::string path;
  if (rank) {
    rank_ = static_cast<int>(settings::get_int(settings::dsm::kRank));
    size_ = static_cast<int>(settings::get_int(settings::dsm::kSize));
    job_id_ = settings::get_string(settings::dsm::kJobId);
    job_dir_ = settings::get_string(settings::dsm::kJobDir);
    if (size_ < 1 || rank_ < 0 || rank_ >= size_) fail("bootstrap: LOOM_RANK=", rank_, " / LOOM_SIZE=", size_, " are inconsistent");
    local_rank_ = static_cast<int>(settings::get_int(settings::dsm::kLocalRank, rank_));
    local_size_ = static_cast<int>(settings::get_int(settings::dsm::kLocalSize, size_));
    if (local_size_ < 1 || local_size_ > size_ || local_rank_ < 0 || local_rank_ >= local_size_ ||
        (settings::get_int(settings::dsm::kNodes) == 1 && local_size_ != size_))
      fail("bootstrap: LOOM_LOCAL_RANK=", local_rank_, " / LOOM_LOCAL_SIZE=", local_size_, " do not fit a job of ", size_,
           " ranks on ", settings::get_int(settings::dsm::kNodes), " node(s)");
    if (job_id_.empty() || job_dir_.empty()) fail("bootstrap: LOOM_JOB_ID and LOOM_JOB_DIR must be set (start with loomrun)");
    path = job_dir_ + "/boot";
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) fail_errno("bootstrap: cannot open " + path + " (was the job started by loomrun?)");
    // Held as long as this rank lives: should loomrun be killed, the directory stays until
    // every rank is gone too.
    hold_ = hold_job_dir(job_dir_);
    if (hold_ < 0) fail_errno("bootstrap: cannot hold the job directory " + job_dir_);
    map_len_ = file_size(size_);
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < map_len_) {
      ::close(fd);
      fail("bootstrap: ", path, " is too small for ", size_, " ranks");
    }
    map_ = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map_ == MAP_FAILED) fail_errno("bootstrap: cannot map " + path);
  } else {
    // Started without loomrun: a job of one, with its own directory, removed at exit.
    // Nobody cleans up after a lone process that is killed, so it sweeps as loomrun does.
    singleton_ = true;
    sweep_stale_job_dirs();
    hold_ = create_new_job_dir(job_id_, job_dir_);
    if (hold_ < 0) fail_errno("bootstrap: cannot create " + job_dir_);
    map_len_ = file_size(1);
    map_ = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map_ == MAP_FAILED) fail_errno("bootstrap: cannot map bootstrap area");
  }
  h_ = static_cast<Header*>(map_);
  slots_ = static_cast<std::byte*>(map_) + (file_size(size_) - kSlotBytes * static_cast<size_t>(size_));
  h_->presence(size_)[rank_].store(presence_word(getpid(), false), std::memory_order_release);
}

// A rank that joined, has not left, and whose process no longer exists: it ended without the
// collective teardown (exit 0 early, or a crash its launcher has not reported yet).
void EmbeddedBootstrap::check_peers() const {
  if (getppid() == 1) fail("bootstrap: the launcher is gone; abandoning the barrier");
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    uint64_t w = h_->presence(size_)[r].load(std::memory_order_acquire);
    if (w == 0 || (w & 1u) != 0) continue;
    pid_t pid = static_cast<pid_t>(w >> 1);
    if (::kill(pid, 0) != 0 && errno == ESRCH)
      fail("bootstrap: rank ", r, " (pid ", pid, ") is gone: it ended without the collective teardown, and the job cannot go on");
  }
}

EmbeddedBootstrap::~EmbeddedBootstrap() {
  if (map_ != nullptr && map_ != MAP_FAILED) {
    h_->presence(size_)[rank_].store(presence_word(getpid(), true), std::memory_order_release);
    munmap(map_, map_len_);
  }
  if (singleton_) {
    std::error_code ec;
    std::filesystem::remove_all(job_dir_, ec);
  }
  if (hold_ >= 0) ::close(hold_);
}

void EmbeddedBootstrap::barrier() { local_barrier(); }

std::atomic<uint64_t>* EmbeddedBootstrap::lengths() const { return h_->lengths(); }

// Pairs with posted_collective's acquire in the other processes of this host.
void EmbeddedBootstrap::post_collective(uint64_t ticket) { h_->posted(size_)[rank_].store(ticket, std::memory_order_release); }

uint64_t EmbeddedBootstrap::posted_collective(int rank) const {
  if (rank < 0 || rank >= size_) return 0;
  return h_->posted(size_)[rank].load(std::memory_order_acquire);
}

void EmbeddedBootstrap::local_barrier() {
  if (local_size_ == 1) return;
  uint32_t gen = h_->generation.load(std::memory_order_acquire);
  if (h_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(local_size_)) {
    h_->arrived.store(0, std::memory_order_relaxed);
    h_->generation.fetch_add(1, std::memory_order_acq_rel);
    wait::futex_wake_all(&h_->generation);
    return;
  }
  wait_while(h_->generation, gen);
}

void EmbeddedBootstrap::wait_while(const std::atomic<uint32_t>& word, uint32_t value) const {
  wait::Backoff b;
  while (word.load(std::memory_order_acquire) == value) {
    if (b.should_sleep()) {
      // A crashed peer ends the job through loomrun; one that left quietly, or the launcher's
      // end, is noticed here; a peer in another collective call, by the Runtime's check.
      check_peers();
      if (long_wait_check_) long_wait_check_();
      wait::futex_wait(&word, value, std::chrono::milliseconds(100));
    } else {
      b.spin_or_yield();
    }
  }
}

std::vector<std::vector<std::byte>> EmbeddedBootstrap::allgather(std::span<const std::byte> mine) {
  std::vector<std::vector<std::byte>> out(static_cast<size_t>(size_));
  size_t offset = 0;
  // Rounds of at most one slot per rank, until every rank's blob is complete.
  for (;;) {
    size_t n = std::min(kSlotBytes, mine.size() - offset);
    if (n != 0) std::memcpy(slots_ + kSlotBytes * static_cast<size_t>(rank_), mine.data() + offset, n);  // an empty span may have no data
    uint64_t remaining_after = mine.size() - offset - n;
    h_->lengths()[rank_].store((static_cast<uint64_t>(n) << 1) | (remaining_after != 0 ? 1u : 0u), std::memory_order_release);
    local_barrier();
    bool more = false;
    for (int r = 0; r < size_; ++r) {
      uint64_t v = h_->lengths()[r].load(std::memory_order_acquire);
      size_t len = static_cast<size_t>(v >> 1);
      if (len > kSlotBytes) fail("bootstrap: rank ", r, " published a malformed slot");
      auto* src = slots_ + kSlotBytes * static_cast<size_t>(r);
      out[static_cast<size_t>(r)].insert(out[static_cast<size_t>(r)].end(), src, src + len);
      more = more || (v & 1u);
    }
    local_barrier();  // slots may be overwritten only after everyone has read them
    offset += n;
    if (!more) break;
  }
  return out;
}

std::unique_ptr<Bootstrap> make_bootstrap() {
  std::string want = settings::get_choice(settings::dsm::kBootstrap);
  const bool nodes = settings::get_int(settings::dsm::kNodes) > 1;
  if (want == "embedded") {
    if (nodes) fail("LOOM_BOOTSTRAP=embedded serves one host, but this job has LOOM_NODES=", settings::get_int(settings::dsm::kNodes), " nodes");
    return std::make_unique<EmbeddedBootstrap>();
  }
  if (want == "rendezvous" || (want == "auto" && nodes && settings::raw(settings::dsm::kRank)))
    return std::make_unique<RendezvousBootstrap>();
#ifdef LOOM_HAVE_PMIX
  if (want == "pmix" || (want == "auto" && !settings::raw(settings::dsm::kRank) && std::getenv("PMIX_RANK") != nullptr))
    return std::make_unique<PmixBootstrap>();
#else
  if (want == "pmix") fail("LOOM_BOOTSTRAP=pmix, but this build has no PMIx support (libpmix-dev was missing)");
#endif
  if (want != "auto" && want != "pmix") fail("LOOM_BOOTSTRAP='", want, "' must be embedded, rendezvous, pmix or auto");
  return std::make_unique<EmbeddedBootstrap>();
}

}  // namespace loom::runtime
