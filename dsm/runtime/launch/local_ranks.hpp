#pragma once
// The ranks a launcher starts on its own host: their job directory and bootstrap file, the
// processes (each in its own process group, dying with the launcher), their output relayed with
// [rank] prefixes, and their ends: the first rank that fails (exits non-zero, is killed, or
// stays stopped for LOOM_STOPPED_LIMIT_MS) is reported once, and terminate() ends them all
// (SIGTERM, SIGKILL half a second later). The job directory goes however the job ends.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "loom/dsm/runtime/launch/link.hpp"
#include "loom/dsm/runtime/launch/options.hpp"

namespace loom::runtime::launch {

// Where this host's ranks sit in the job.
struct Placement {
  int first_rank = 0;   // global rank of the first one here
  int size = 0;         // ranks in the job
  int node = 0;         // this node's index, and the number of nodes (1: a one-host job)
  int nodes = 1;
  std::string host;     // this host's name, in messages of jobs over several nodes
  int leader_fd = -1;   // the leader's end of its link to this launcher (several nodes), or -1
};

class LocalRanks {
 public:
  LocalRanks(const Options& o, char** argv);
  ~LocalRanks();
  LocalRanks(const LocalRanks&) = delete;
  LocalRanks& operator=(const LocalRanks&) = delete;

  // The job directory and the bootstrap file for `p.size` ranks; false (after saying why) if
  // they cannot be made.
  bool set_up(const Placement& p);
  // Starts o.n ranks; false (after saying why) if one cannot be started.
  bool start();
  // Their output descriptors, for the launcher's poll.
  void add_to(PollSet& ps);
  // Reaps ended ranks, watches stopped ones, escalates a termination to SIGKILL.
  void tick();
  // The first failure (once): the status the job should end with and one line saying why.
  std::optional<Status> take_failure();
  void terminate(int code);
  bool terminating() const { return terminating_; }
  int running() const { return running_; }
  bool output_open() const;
  // True once every rank has ended and its output is drained (or given up on: a killed
  // rank's children may hold its pipes open).
  bool finished() const;
  // The job's status: the first failure's, or terminate()'s code, or 0.
  int status() const { return code_; }
  const std::string& job_id() const { return job_id_; }
  void flush_output();

 private:
  struct Child;
  void relay(Child& k, int which);
  void note_end(Child& k, int st);
  void check_stopped();
  void signal_all(int sig);
  std::string who(const Child& k) const;

  const Options& o_;
  char** argv_;
  Placement place_;
  std::string job_id_, job_dir_;
  std::vector<Child> kids_;
  int running_ = 0;
  int code_ = 0;
  bool terminating_ = false;
  std::optional<Status> failure_;
  bool failure_taken_ = false;
  Clock::time_point term_at_;
  int64_t stopped_limit_ms_ = 3000;
};

}  // namespace loom::runtime::launch
