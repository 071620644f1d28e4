#pragma once
// The node launchers a --hosts launcher starts: this host's directly, the others through the
// remote shell. Their output (already prefixed with ranks) is relayed line by line; one that
// ends badly before the job is over is a failure naming its ranks and host, as the rendezvous
// names a node it lost (whichever notices first reports); once the job is over,
// those still running are ended (SIGTERM, SIGKILL a second later).
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "loom/dsm/runtime/launch/link.hpp"
#include "loom/dsm/runtime/launch/options.hpp"

namespace loom::runtime::launch {

class StartedNodes {
 public:
  StartedNodes(const Options& o, char** argv, const std::string& addr, int port);
  ~StartedNodes();
  bool start();
  const std::string& failure() const { return start_failure_; }
  void add_to(PollSet& ps);
  // Reaps ended launchers; once `job_over`, ends the ones still running after `grace`.
  void tick(bool job_over, std::chrono::milliseconds grace);
  std::optional<std::string> take_failure();
  bool running() const;
  void flush_output();

 private:
  struct Node {
    int index = 0;
    std::string host;
    bool remote = false;
    pid_t pid = -1;
    int fd[3] = {-1, -1, -1};
    std::string buf[3];
    bool running = false;
  };
  void relay(Node& n, int which);
  // "ranks 2-3 on b": the ranks node n runs and its host.
  std::string ranks_of(const Node& n) const;

  const Options& o_;
  char** argv_;
  std::string addr_;
  int port_;
  std::vector<Node> nodes_;
  std::string start_failure_;
  std::vector<std::string> failures_;
  bool over_ = false;
  Clock::time_point over_at_;
  bool termed_ = false;
  bool killed_ = false;
};

}  // namespace loom::runtime::launch
