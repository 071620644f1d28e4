#pragma once
// One node's launcher in a job over several nodes: meets the others at the rendezvous server,
// starts this node's ranks once the job is assembled, carries the leader rank's fences to the
// server and back, and ends its ranks when the job ends: at a failure here (reported to the
// server), at the server's word, or when the server has not been heard from for
// LOOM_NODE_TIMEOUT_MS (the node that served it is lost).
#include <memory>
#include <optional>
#include <string>

#include "loom/dsm/runtime/launch/local_ranks.hpp"
#include "loom/dsm/runtime/launch/rendezvous.hpp"

namespace loom::runtime::launch {

class NodeAgent {
 public:
  NodeAgent(const Options& o, char** argv, const Timing& t);
  // Connects to the server (retrying until LOOM_RENDEZVOUS_TIMEOUT_MS) and says hello; false
  // (after saying why) if it cannot.
  bool join(const std::string& host, int port);
  void add_to(PollSet& ps);
  void tick();
  // A signal to this launcher, or its --timeout: ends the job everywhere.
  void stop(int code, const std::string& why);
  bool finished() const { return finished_; }
  int status() const { return status_; }

 private:
  void on_server_frame(const Frame& f);
  void on_welcome(const Welcome& w);
  void on_leader_frame(const Frame& f);
  void end_here(int code, const std::string& why, bool say);
  void server_lost(const std::string& why);

  const Options& o_;
  char** argv_;
  Timing t_;
  std::unique_ptr<Link> server_;
  std::unique_ptr<Link> leader_;
  LocalRanks ranks_;
  Welcome welcome_;
  bool welcomed_ = false;
  bool ending_ = false;
  bool said_ = false;      // this launcher printed why the job ends
  bool done_sent_ = false;
  bool bye_ = false;
  bool finished_ = false;
  int status_ = 0;
  Clock::time_point joined_at_;
  Clock::time_point last_beat_ = Clock::now();
  Clock::time_point done_at_;
};

}  // namespace loom::runtime::launch
