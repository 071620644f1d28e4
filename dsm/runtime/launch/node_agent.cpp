// A node's launcher: joining the rendezvous, this node's ranks, fences, heartbeats, the end.
#include "loom/dsm/runtime/launch/node_agent.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/launch/build_id.hpp"

namespace loom::runtime::launch {

namespace {
std::string this_host() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  return h;
}
}  // namespace

NodeAgent::NodeAgent(const Options& o, char** argv, const Timing& t) : o_(o), argv_(argv), t_(t), ranks_(o, argv) {}

bool NodeAgent::join(const std::string& host, int port) {
  const auto until = Clock::now() + t_.rendezvous_timeout;
  std::string why;
  int fd = -1;
  // The server may not listen yet (its node starts later): refused connections are retried.
  for (auto pause = std::chrono::milliseconds(50);; pause = std::min(pause * 2, std::chrono::milliseconds(1000))) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    fd = tcp_connect(host, port, std::max(left, std::chrono::milliseconds(1)), &why);
    if (fd >= 0 || Clock::now() + pause >= until) break;
    std::this_thread::sleep_for(pause);
  }
  if (fd < 0) {
    std::fprintf(stderr, "loomrun: cannot reach the rendezvous at %s:%d within %.1f s (LOOM_RENDEZVOUS_TIMEOUT_MS): %s\n",
                 host.c_str(), port, static_cast<double>(t_.rendezvous_timeout.count()) / 1000, why.c_str());
    return false;
  }
  server_ = std::make_unique<Link>(fd, "the rendezvous at " + host + ":" + std::to_string(port));
  Hello h;
  h.build = build_id();
  h.node = static_cast<uint32_t>(o_.node_rank);
  h.nodes = static_cast<uint32_t>(o_.nodes);
  h.procs = static_cast<uint32_t>(o_.n);
  h.host = this_host();
  server_->send(encode(h));
  joined_at_ = Clock::now();
  return true;
}

void NodeAgent::add_to(PollSet& ps) {
  if (server_ && server_->open()) {
    ps.add(server_->fd(), server_->events(), [this](short ev) {
      const bool ok = server_->on_events(ev);
      try {
        while (auto f = server_->next()) on_server_frame(*f);
      } catch (const Error& e) {
        server_->close(e.what());
      }
      if (!ok || !server_->open()) server_lost(server_->why_closed());
    });
  }
  if (leader_ && leader_->open()) {
    ps.add(leader_->fd(), leader_->events(), [this](short ev) {
      leader_->on_events(ev);
      try {
        while (auto f = leader_->next()) on_leader_frame(*f);
      } catch (const Error& e) {
        end_here(1, std::string("this node's leader rank sent a bad message: ") + e.what(), true);
      }
    });
  }
  if (welcomed_) ranks_.add_to(ps);
}

void NodeAgent::on_server_frame(const Frame& f) {
  switch (f.type) {
    case MsgType::Welcome:
      if (welcomed_) fail("launcher: a second welcome");
      return on_welcome(decode_welcome(f.payload));
    case MsgType::Reject: {
      const Status s = decode_status(f.payload);
      std::fprintf(stderr, "loomrun: the rendezvous refused this node: %s\n", s.why.c_str());
      status_ = s.code != 0 ? s.code : 2;
      finished_ = true;
      return;
    }
    case MsgType::FenceDown:
      if (leader_) leader_->send(encode(MsgType::FenceDown, decode_fence(f.payload)));
      return;
    case MsgType::Heartbeat:
      return;
    case MsgType::Abort: {
      const Status s = decode_status(f.payload);
      if (ending_) {  // this node's own failure, now named by the server
        if (!o_.head_reports && !said_) std::fprintf(stderr, "loomrun: %s; terminating the job\n", s.why.c_str());
        said_ = true;
        status_ = s.code;
      }
      end_here(s.code, s.why, !o_.head_reports);
      return;
    }
    case MsgType::Bye: {
      const Status s = decode_status(f.payload);
      if (!ending_ && s.code != 0) end_here(s.code, s.why, !o_.head_reports);
      if (status_ == 0) status_ = s.code;
      bye_ = true;
      if (!welcomed_ || done_sent_) finished_ = true;
      return;
    }
    default:
      fail("launcher: the rendezvous sent a ", to_string(f.type), " message");
  }
}

void NodeAgent::on_welcome(const Welcome& w) {
  if (w.procs.size() != static_cast<size_t>(o_.nodes) || w.procs[static_cast<size_t>(o_.node_rank)] != static_cast<uint32_t>(o_.n))
    fail("launcher: the welcome does not match this node (", w.procs.size(), " nodes)");
  welcome_ = w;
  welcomed_ = true;
  Placement p;
  p.node = o_.node_rank;
  p.nodes = o_.nodes;
  p.host = w.hosts[static_cast<size_t>(o_.node_rank)];
  for (size_t k = 0; k < w.procs.size(); ++k) {
    if (static_cast<int>(k) < o_.node_rank) p.first_rank += static_cast<int>(w.procs[k]);
    p.size += static_cast<int>(w.procs[k]);
  }
  int pair[2] = {-1, -1};
  if (o_.nodes > 1 && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0) {
    leader_ = std::make_unique<Link>(pair[0], "this node's leader rank");
    p.leader_fd = pair[1];
  }
  const bool started = ranks_.set_up(p) && ranks_.start();
  if (pair[1] >= 0) ::close(pair[1]);
  if (!started) end_here(1, "cannot start the ranks on " + p.host, true);
}

void NodeAgent::on_leader_frame(const Frame& f) {
  if (f.type != MsgType::FenceUp) fail("launcher: the leader rank sent a ", to_string(f.type), " message");
  if (server_ && server_->open()) server_->send(encode(MsgType::FenceUp, decode_fence(f.payload)));
}

// Ends this node's ranks. The reason goes to the server (which ends the other nodes) unless it
// came from there; `say` prints it here (the --hosts launcher prints it once for all nodes).
void NodeAgent::end_here(int code, const std::string& why, bool say) {
  if (ending_) return;
  ending_ = true;
  status_ = code;
  if (say && !said_) {
    std::fprintf(stderr, "loomrun: %s; terminating the job\n", why.c_str());
    said_ = true;
  }
  ranks_.terminate(code);
  if (!welcomed_) finished_ = true;
}

void NodeAgent::stop(int code, const std::string& why) {
  if (ending_) return;
  if (server_ && server_->open()) server_->send(encode(MsgType::Failure, Status{code, why}));
  end_here(code, why, true);
}

void NodeAgent::server_lost(const std::string& why) {
  if (finished_) return;
  if (done_sent_) {  // every rank here has ended: nothing is left to end
    finished_ = true;
    return;
  }
  if (!welcomed_) {
    std::fprintf(stderr, "loomrun: lost the rendezvous before the job was assembled: %s\n", why.c_str());
    status_ = 1;
    finished_ = true;
    return;
  }
  // The server is node 0's launcher in the rendezvous form; in the --hosts form, the launcher
  // the user started (whose own node, if any, is among the others). Either way the job ends.
  std::string lost = "the launcher that started this job";
  if (!o_.head_reports) {
    const uint32_t n0 = welcome_.procs[0];
    lost = "node 0 (" + (n0 == 1 ? std::string("rank 0") : "ranks 0-" + std::to_string(n0 - 1)) + " on " + welcome_.hosts[0] + ")";
  }
  end_here(1, "lost " + lost + ": " + why, true);
}

void NodeAgent::tick() {
  const auto now = Clock::now();
  if (server_ && server_->open() && now - last_beat_ >= t_.heartbeat) {
    last_beat_ = now;
    server_->send(encode_empty(MsgType::Heartbeat));
  }
  if (welcomed_ && server_ && server_->open() && !finished_ && now - server_->last_heard() > t_.node_timeout) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(now - server_->last_heard()).count()) / 1000);
    server_->close(std::string("nothing heard from it for ") + secs + " s (LOOM_NODE_TIMEOUT_MS)");
    server_lost(server_->why_closed());
  }
  if (!welcomed_) {
    if (!finished_ && now - joined_at_ > t_.rendezvous_timeout + t_.node_timeout) {
      std::fprintf(stderr, "loomrun: the rendezvous did not assemble the job within %.1f s (LOOM_RENDEZVOUS_TIMEOUT_MS)\n",
                   static_cast<double>(t_.rendezvous_timeout.count()) / 1000);
      status_ = 1;
      finished_ = true;
    }
    return;
  }
  ranks_.tick();
  if (auto f = ranks_.take_failure()) {
    // The server decides what the job's end is called (this failure, or another node's loss
    // it followed from) and says so in its abort; without a server, this node says it.
    const bool reported = server_ && server_->open();
    if (reported) server_->send(encode(MsgType::Failure, *f));
    end_here(f->code, f->why, !reported);
  }
  if (ranks_.finished() && !done_sent_) {
    ranks_.flush_output();
    done_sent_ = true;
    done_at_ = now;
    if (!ending_) status_ = ranks_.status();
    if (server_ && server_->open()) server_->send(encode(MsgType::Done, Status{status_, {}}));
    else finished_ = true;
  }
  // After its report, a node waits for the server's goodbye, but not forever.
  if (done_sent_ && !finished_ && (bye_ || !server_ || !server_->open() || now - done_at_ > t_.node_timeout)) finished_ = true;
}

}  // namespace loom::runtime::launch
