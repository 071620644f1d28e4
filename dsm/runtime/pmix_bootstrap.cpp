#include <pmix.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/futex.hpp"
#include "loom/dsm/runtime/pmix_bootstrap.hpp"
#include "loom/dsm/runtime/job_dir.hpp"
#include "loom/dsm/runtime/peer_watch.hpp"

namespace loom::runtime {

struct PmixBootstrap::State {
  pmix_proc_t me;
};

namespace {
void check(pmix_status_t rc, const char* what) {
  if (rc != PMIX_SUCCESS) fail("PMIx bootstrap: ", what, " failed: ", PMIx_Error_string(rc));
}

// A value the launcher publishes for the job (wildcard rank) or for this process.
uint32_t get_u32(const pmix_proc_t& me, bool job, const char* key, uint32_t fallback) {
  pmix_proc_t p;
  PMIX_PROC_CONSTRUCT(&p);
  PMIX_LOAD_PROCID(&p, me.nspace, job ? PMIX_RANK_WILDCARD : me.rank);
  pmix_value_t* v = nullptr;
  if (PMIx_Get(&p, key, nullptr, 0, &v) != PMIX_SUCCESS || v == nullptr) return fallback;
  uint32_t out = fallback;
  if (v->type == PMIX_UINT32) out = v->data.uint32;
  else if (v->type == PMIX_UINT16) out = v->data.uint16;
  else if (v->type == PMIX_INT) out = static_cast<uint32_t>(v->data.integer);
  PMIX_VALUE_RELEASE(v);
  return out;
}
}  // namespace

PmixBootstrap::PmixBootstrap() : st_(std::make_unique<State>()) {
  check(PMIx_Init(&st_->me, nullptr, 0), "PMIx_Init (was the program started by a PMIx launcher?)");
  rank_ = static_cast<int>(st_->me.rank);
  job_id_ = st_->me.nspace;
  size_ = static_cast<int>(get_u32(st_->me, true, PMIX_JOB_SIZE, 0));
  if (size_ < 1 || rank_ >= size_) fail("PMIx bootstrap: the launcher gave rank ", rank_, " of ", size_);
  local_rank_ = static_cast<int>(get_u32(st_->me, false, PMIX_LOCAL_RANK, static_cast<uint32_t>(rank_)));
  local_size_ = static_cast<int>(get_u32(st_->me, true, PMIX_LOCAL_SIZE, static_cast<uint32_t>(size_)));
  std::string safe;
  for (char c : job_id_) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  job_dir_ = shm_root() + "/loom-pmix-" + safe;
  if (local_rank_ == 0) {
    // No loomrun here to clean up after a killed job: the first rank of each host sweeps.
    sweep_stale_job_dirs();
    hold_ = create_job_dir(job_dir_, /*may_exist=*/true);
    if (hold_ < 0) fail_errno("PMIx bootstrap: cannot create " + job_dir_);
  }
  barrier();
  if (local_rank_ != 0) {
    hold_ = hold_job_dir(job_dir_);
    if (hold_ < 0) fail_errno("PMIx bootstrap: cannot hold " + job_dir_);
  }
}

PmixBootstrap::~PmixBootstrap() {
  try {
    barrier();
  } catch (...) {
  }
  if (local_rank_ == 0) {
    std::error_code ec;
    std::filesystem::remove_all(job_dir_, ec);
  }
  if (hold_ >= 0) ::close(hold_);
  PMIx_Finalize(nullptr, 0);
}

namespace {
// A fence in flight: PMIx completes it on its own progress thread. A waiter that fails (a peer
// cannot take part) leaves it behind, so it lives on the heap and is then never freed.
struct PendingFence {
  std::atomic<uint32_t> done{0};
  std::atomic<pmix_status_t> status{PMIX_SUCCESS};
  pmix_info_t info;
  static void completed(pmix_status_t st, void* self) {
    auto* f = static_cast<PendingFence*>(self);
    f->status.store(st, std::memory_order_relaxed);
    f->done.store(1, std::memory_order_release);
    wait::futex_wake_all(&f->done);
  }
};
}  // namespace

// With no PeerWatch (the Runtime's set-up and teardown) the fence blocks in PMIx; with one, it
// is waited for here, asking between sleeps whether every peer can still take part: PMIx ends a
// fence early when a process exits, but not when one is stopped.
void PmixBootstrap::fence(bool collect, const char* what) {
  if (watch_ == nullptr) {
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    const pmix_status_t rc = PMIx_Fence(nullptr, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    return check(rc, what);
  }
  auto* f = new PendingFence;
  PMIX_INFO_CONSTRUCT(&f->info);
  PMIX_INFO_LOAD(&f->info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  check(PMIx_Fence_nb(nullptr, 0, &f->info, 1, &PendingFence::completed, f), what);
  wait::Backoff b;
  while (f->done.load(std::memory_order_acquire) == 0) {
    if (!b.should_sleep()) {
      b.spin_or_yield();
      continue;
    }
    watch_->check_all("bootstrap: ", what);  // leaves f behind if it fails
    wait::futex_wait(&f->done, 0, std::chrono::milliseconds(20));
  }
  const pmix_status_t rc = f->status.load(std::memory_order_relaxed);
  PMIX_INFO_DESTRUCT(&f->info);
  delete f;
  if (rc != PMIX_SUCCESS) {
    // PMIx ends the fence when a process's connection closes, which may be a moment before the
    // process is gone as far as this host can tell: name it once it is.
    for (int tries = 0; tries < 100; ++tries) {
      watch_->check_all("bootstrap: ", what);
      std::this_thread::sleep_for(std::chrono::milliseconds(PeerWatch::kAllPollMs));
    }
    check(rc, what);
  }
}

void PmixBootstrap::barrier() { fence(false, "PMIx_Fence"); }

std::vector<std::vector<std::byte>> PmixBootstrap::allgather(std::span<const std::byte> mine) {
  // A fresh key per round: PMIx keeps every value put, so rounds must not collide.
  std::string key = "loom.ag." + std::to_string(round_++);
  pmix_value_t val;
  PMIX_VALUE_CONSTRUCT(&val);
  val.type = PMIX_BYTE_OBJECT;
  val.data.bo.bytes = reinterpret_cast<char*>(const_cast<std::byte*>(mine.data()));
  val.data.bo.size = mine.size();
  check(PMIx_Put(PMIX_GLOBAL, key.c_str(), &val), "PMIx_Put");
  check(PMIx_Commit(), "PMIx_Commit");
  fence(true, "PMIx_Fence (collect)");
  std::vector<std::vector<std::byte>> out(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    pmix_proc_t p;
    PMIX_PROC_CONSTRUCT(&p);
    PMIX_LOAD_PROCID(&p, st_->me.nspace, static_cast<pmix_rank_t>(r));
    pmix_value_t* v = nullptr;
    check(PMIx_Get(&p, key.c_str(), nullptr, 0, &v), "PMIx_Get");
    if (v == nullptr || v->type != PMIX_BYTE_OBJECT) fail("PMIx bootstrap: rank ", r, " published a malformed value");
    const auto* b = reinterpret_cast<const std::byte*>(v->data.bo.bytes);
    out[static_cast<size_t>(r)].assign(b, b + v->data.bo.size);
    PMIX_VALUE_RELEASE(v);
  }
  return out;
}

}  // namespace loom::runtime
