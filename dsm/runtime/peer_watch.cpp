#include "loom/dsm/runtime/peer_watch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime {

namespace {
constexpr const char* kGone = "is gone (it died, or ended without the collective teardown)";
}  // namespace

PeerWatch::PeerWatch(fabric::Provider& provider, Options o)
    : provider_(provider),
      o_(std::move(o)),
      stopped_since_(new std::atomic<int64_t>[o_.pids.size()]()),
      looked_at_(new std::atomic<int64_t>[o_.pids.size()]()) {
  if (o_.same_host.size() != o_.pids.size()) fail("PeerWatch: ", o_.pids.size(), " pids but ", o_.same_host.size(), " host flags");
}

int64_t PeerWatch::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

char PeerWatch::process_state(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  // "pid (comm) S ...": the command may hold spaces and parentheses; the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == 0) return 0;
  return close[2];
}

std::string PeerWatch::stopped_for_too_long(int r) {
  const size_t i = static_cast<size_t>(r);
  if (!o_.watch_stops || !o_.same_host[i]) return {};
  const int64_t now = now_ms();
  if (now - looked_at_[i].load(std::memory_order_relaxed) >= kStopPollMs) {
    looked_at_[i].store(now, std::memory_order_relaxed);
    const char s = process_state(o_.pids[i]);
    // A launcher that has not reaped its process yet leaves a zombie, which kill(2) finds.
    if (s == 'Z' || s == 'X') return kGone;
    if (s != 'T' && s != 't') {
      stopped_since_[i].store(0, std::memory_order_relaxed);
      return {};
    }
    int64_t expected = 0;
    stopped_since_[i].compare_exchange_strong(expected, now, std::memory_order_relaxed);
  }
  const int64_t since = stopped_since_[i].load(std::memory_order_relaxed);
  if (since == 0 || o_.stopped_limit.count() == 0 || now - since < o_.stopped_limit.count()) return {};
  return "(pid " + std::to_string(o_.pids[i]) + ") has been stopped by a signal for " + std::to_string(now - since) +
         " ms (LOOM_STOPPED_LIMIT_MS is " + std::to_string(o_.stopped_limit.count()) + ")";
}

std::string PeerWatch::lost(int r) {
  if (r < 0 || static_cast<size_t>(r) >= o_.pids.size()) fail("PeerWatch: no rank ", r, " in a job of ", o_.pids.size());
  if (r == o_.self) return {};
  if (!provider_.peer_alive(r)) return kGone;
  return stopped_for_too_long(r);
}

int PeerWatch::first_lost(std::string* why) {
  for (int r = 0; r < static_cast<int>(o_.pids.size()); ++r) {
    std::string w = lost(r);
    if (w.empty()) continue;
    if (why != nullptr) *why = std::move(w);
    return r;
  }
  return -1;
}

int PeerWatch::first_lost_if_due(std::string* why) {
  const int64_t now = now_ms();
  int64_t next = next_all_.load(std::memory_order_relaxed);
  if (now < next || !next_all_.compare_exchange_strong(next, now + kAllPollMs, std::memory_order_relaxed)) return -1;
  return first_lost(why);
}

}  // namespace loom::runtime
