#pragma once
// The rendezvous server of a job over several nodes: the launcher of node 0 in the rendezvous
// form, the launcher the user started in the --hosts form. Every node's launcher connects and
// says hello; once all have (within LOOM_RENDEZVOUS_TIMEOUT_MS), each is welcomed with the
// job's layout. Then the server
//  - joins the nodes' fences (the bootstrap's allgathers and barriers across nodes),
//  - exchanges heartbeats: a node not heard from for LOOM_NODE_TIMEOUT_MS is lost,
//  - ends the job on every node at the first failure anywhere (one reason, one status),
//  - says goodbye once every node's ranks have ended.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/dsm/runtime/launch/link.hpp"

namespace loom::runtime::launch {

struct Timing {
  std::chrono::milliseconds heartbeat{500};
  std::chrono::milliseconds node_timeout{5000};
  std::chrono::milliseconds rendezvous_timeout{60000};
  static Timing from_settings();
};

class RendezvousServer {
 public:
  RendezvousServer(int listen_fd, int nodes, const Timing& t);
  void add_to(PollSet& ps);
  void tick();
  // Ends the job on every node (a signal to the launcher, a node that could not be started).
  void abort(int code, const std::string& why);
  // Once every node has ended (or is gone after an abort): the job's status and, if it did
  // not end cleanly, why.
  bool finished() const { return finished_; }
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }
  bool welcomed() const { return welcomed_; }
  // The ranks of node k, as "ranks 2-3 on loom-node1" (after the welcome).
  std::string describe_node(int k) const;

 private:
  struct Node {
    std::unique_ptr<Link> link;
    std::string host;
    uint32_t procs = 0;
    bool present = false;
    bool done = false;
    bool fenced = false;
    std::vector<std::byte> fence_blob;
  };
  void accept_new();
  void on_frame(std::unique_ptr<Link>& pending, size_t slot);
  void on_node_frame(int k, const Frame& f);
  void on_hello(std::unique_ptr<Link> link, const Hello& h);
  void welcome_all();
  void on_fence(int k, const Fence& f);
  void on_failure(int k, const Status& s);
  void node_gone(int k, const std::string& why);
  void lose(int k, const std::string& why);
  void check_silence();
  void broadcast(const std::vector<std::byte>& frame);
  void maybe_finish();

  int listen_fd_;
  Timing t_;
  std::vector<Node> nodes_;
  std::vector<std::unique_ptr<Link>> pending_;  // connected, no hello yet
  Clock::time_point started_ = Clock::now();
  Clock::time_point last_beat_ = Clock::now();
  bool welcomed_ = false;
  uint64_t fence_seq_ = 0;
  bool ending_ = false;
  Clock::time_point ending_at_;
  void settle_deferred();
  std::optional<Status> deferred_;   // a failure held until every other node is heard from
  int deferred_node_ = -1;
  Clock::time_point deferred_at_;
  bool finished_ = false;
  int status_ = 0;
  std::string reason_;
};

}  // namespace loom::runtime::launch
