#pragma once
// Whether a peer can still take part in the job. Every wait on other processes asks between its
// sleeps and fails naming the peer when it cannot, instead of waiting forever (docs/user-guide.md,
// "Launching"). A peer cannot take part when
//  - it is gone: it died, or ended without the collective teardown (the provider's liveness
//    check: on one host its pid, on verbs across hosts the transport's retry limit);
//  - it has been stopped by a signal (SIGSTOP, SIGTSTP) for longer than LOOM_STOPPED_LIMIT_MS.
//    loomrun watches its ranks for stops and ends the job itself; under another launcher (PMIx)
//    nothing does, so there the waits look at a stopped peer on this host (/proc/<pid>/stat).
//    A stopped peer on another host is not seen by them. There they also take a peer that its
//    launcher has not reaped yet (a zombie) for gone.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/fabric.hpp"

namespace loom::runtime {

class PeerWatch {
 public:
  struct Options {
    int self = 0;
    std::vector<int> pids;        // per rank
    std::vector<bool> same_host;  // per rank: on this host (its pid can be looked at)
    bool watch_stops = false;     // no launcher ends a job whose rank stays stopped
    std::chrono::milliseconds stopped_limit{3000};  // 0: a stopped peer is waited for
  };
  PeerWatch(fabric::Provider& provider, Options o);

  // Why rank r cannot take part any more ("is gone (...)", "has been stopped ..."), or an empty
  // string while it can. A kill(2) per call; where stops are watched, a read of /proc at most
  // every kStopPollMs per rank.
  std::string lost(int r);
  // Fails with "<what...>: rank r <why>" if rank r cannot take part. The message is formed only
  // then: a check that passes allocates nothing (waits inside fault handlers call it).
  template <typename... What>
  void check(int r, const What&... what) {
    std::string why = lost(r);
    if (!why.empty()) fail(what..., ": rank ", r, " ", why, "; the job cannot go on without it");
  }
  // The same over every other rank, at most once per kAllPollMs (a wait that may depend on any
  // rank: invocation's, the bootstrap's).
  template <typename... What>
  void check_all(const What&... what) {
    std::string why;
    const int r = first_lost_if_due(&why);
    if (r >= 0) fail(what..., ": rank ", r, " ", why, "; the job cannot go on without it");
  }
  // The first other rank that cannot take part, or -1; `why` says why.
  int first_lost(std::string* why);
  // first_lost() if kAllPollMs have passed since the last look (on any thread), else -1.
  int first_lost_if_due(std::string* why);

  // The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 't' traced, ...); 0 when the
  // process cannot be read. Pure apart from the read: public for tests.
  static char process_state(int pid);

  static constexpr int64_t kAllPollMs = 10;  // check_all looks at every rank at most this often

 private:
  static constexpr int64_t kStopPollMs = 10;
  static int64_t now_ms();
  std::string stopped_for_too_long(int r);

  fabric::Provider& provider_;
  Options o_;
  // Per rank, for stops: when it was first seen stopped (0: not stopped) and last looked at.
  std::unique_ptr<std::atomic<int64_t>[]> stopped_since_;
  std::unique_ptr<std::atomic<int64_t>[]> looked_at_;
  std::atomic<int64_t> next_all_{0};
};

}  // namespace loom::runtime
