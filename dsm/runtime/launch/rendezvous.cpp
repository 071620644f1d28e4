// The rendezvous server: hellos and the welcome, fences across nodes, heartbeats, the job's end.
#include "loom/dsm/runtime/launch/rendezvous.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/launch/build_id.hpp"

namespace loom::runtime::launch {

namespace {
std::string seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000);
  return buf;
}
}  // namespace

Timing Timing::from_settings() {
  Timing t;
  t.heartbeat = std::chrono::milliseconds(settings::get_int(settings::dsm::kHeartbeat));
  t.node_timeout = std::chrono::milliseconds(settings::get_int(settings::dsm::kNodeTimeout));
  t.rendezvous_timeout = std::chrono::milliseconds(settings::get_int(settings::dsm::kRendezvousTimeout));
  if (t.node_timeout < 2 * t.heartbeat)
    fail("LOOM_NODE_TIMEOUT_MS (", t.node_timeout.count(), ") must be at least twice LOOM_HEARTBEAT_MS (", t.heartbeat.count(), ")");
  return t;
}

RendezvousServer::RendezvousServer(int listen_fd, int nodes, const Timing& t)
    : listen_fd_(listen_fd), t_(t), nodes_(static_cast<size_t>(nodes)) {}

std::string RendezvousServer::describe_node(int k) const {
  uint32_t first = 0;
  for (int i = 0; i < k; ++i) first += nodes_[static_cast<size_t>(i)].procs;
  const Node& n = nodes_[static_cast<size_t>(k)];
  const std::string ranks = n.procs == 1 ? "rank " + std::to_string(first)
                                         : "ranks " + std::to_string(first) + "-" + std::to_string(first + n.procs - 1);
  return ranks + " on " + (n.host.empty() ? "node " + std::to_string(k) : n.host);
}

void RendezvousServer::add_to(PollSet& ps) {
  if (listen_fd_ >= 0 && !welcomed_) ps.add(listen_fd_, POLLIN, [this](short) { accept_new(); });
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (!pending_[i]) continue;
    ps.add(pending_[i]->fd(), pending_[i]->events(), [this, i](short ev) {
      if (!pending_[i]) return;
      if (!pending_[i]->on_events(ev)) {
        pending_[i].reset();
        return;
      }
      on_frame(pending_[i], i);
    });
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    Link* l = nodes_[k].link.get();
    if (l == nullptr || !l->open()) continue;
    ps.add(l->fd(), l->events(), [this, k](short ev) {
      Link* l = nodes_[k].link.get();
      const bool ok = l->on_events(ev);
      try {
        while (auto f = l->next()) on_node_frame(static_cast<int>(k), *f);
      } catch (const Error& e) {
        l->close(e.what());
      }
      if (!ok || !l->open()) node_gone(static_cast<int>(k), l->why_closed());
    });
  }
}

void RendezvousServer::accept_new() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    pending_.push_back(std::make_unique<Link>(fd, "a node's launcher"));
  }
}

void RendezvousServer::on_frame(std::unique_ptr<Link>& pending, size_t) {
  try {
    auto f = pending->next();
    if (!f) return;
    if (f->type != MsgType::Hello) fail("launcher: a ", to_string(f->type), " message before the hello");
    on_hello(std::move(pending), decode_hello(f->payload));
  } catch (const Error& e) {
    pending->send(encode(MsgType::Reject, Status{2, e.what()}));
    pending->flush(std::chrono::milliseconds(200));
    pending.reset();
  }
}

void RendezvousServer::on_hello(std::unique_ptr<Link> link, const Hello& h) {
  auto refuse = [&](const std::string& why) {
    link->send(encode(MsgType::Reject, Status{2, why}));
    link->flush(std::chrono::milliseconds(200));
  };
  if (h.protocol != kProtocol)
    return refuse("launcher protocol " + std::to_string(h.protocol) + " on " + h.host + ", " + std::to_string(kProtocol) + " here");
  if (h.build != build_id())
    return refuse("node " + std::to_string(h.node) + " (" + h.host + ") runs Loom build '" + h.build +
                  "', the rendezvous runs '" + build_id() + "': every node must run the same build");
  if (h.nodes != nodes_.size())
    return refuse("node " + std::to_string(h.node) + " (" + h.host + ") says --nodes " + std::to_string(h.nodes) +
                  ", the rendezvous was started with " + std::to_string(nodes_.size()));
  if (h.node >= nodes_.size()) return refuse("node rank " + std::to_string(h.node) + " is out of range");
  Node& n = nodes_[h.node];
  if (n.present || welcomed_)
    return refuse("node rank " + std::to_string(h.node) + " (" + h.host + ") is already taken by " + n.host);
  if (h.procs < 1 || h.procs > 1024) return refuse("node " + std::to_string(h.node) + " asks for " + std::to_string(h.procs) + " ranks");
  n.present = true;
  n.host = h.host;
  n.procs = h.procs;
  n.link = std::move(link);
  for (const auto& m : nodes_)
    if (!m.present) return;
  welcome_all();
}

void RendezvousServer::welcome_all() {
  Welcome w;
  w.job = "loom-" + std::to_string(::getpid());
  for (const auto& n : nodes_) {
    w.procs.push_back(n.procs);
    w.hosts.push_back(n.host);
  }
  uint32_t total = 0;
  for (uint32_t p : w.procs) total += p;
  if (total > 32767) {
    abort(2, "the nodes ask for " + std::to_string(total) + " ranks in all (limit 32767)");
    return;
  }
  welcomed_ = true;
  pending_.clear();
  broadcast(encode(w));
}

void RendezvousServer::on_node_frame(int k, const Frame& f) {
  switch (f.type) {
    case MsgType::Heartbeat:
      return;
    case MsgType::FenceUp:
      return on_fence(k, decode_fence(f.payload));
    case MsgType::Failure:
      return on_failure(k, decode_status(f.payload));
    case MsgType::Done: {
      const Status s = decode_status(f.payload);
      nodes_[static_cast<size_t>(k)].done = true;
      if (s.code != 0 && !ending_) on_failure(k, Status{s.code, s.why.empty() ? describe_node(k) + " ended with status " + std::to_string(s.code) : s.why});
      return maybe_finish();
    }
    default:
      fail("launcher: node ", k, " sent a ", to_string(f.type), " message");
  }
}

// A fence is complete when every node has sent its part for the current sequence number; the
// answer is every node's part in node order (join_parts).
void RendezvousServer::on_fence(int k, const Fence& f) {
  Node& n = nodes_[static_cast<size_t>(k)];
  if (!welcomed_) fail("launcher: node ", k, " sent a fence before the job was assembled");
  if (f.seq != fence_seq_ || n.fenced)
    fail("launcher: node ", k, " is at fence ", f.seq, " while the job is at ", fence_seq_, " (a collective called by some ranks only)");
  n.fenced = true;
  n.fence_blob = f.blob;
  for (const auto& m : nodes_)
    if (!m.fenced) return;
  std::vector<std::vector<std::byte>> parts;
  for (auto& m : nodes_) {
    parts.push_back(std::move(m.fence_blob));
    m.fence_blob.clear();
    m.fenced = false;
  }
  Fence down;
  down.seq = fence_seq_++;
  down.blob = join_parts(parts);
  broadcast(encode(MsgType::FenceDown, down));
}

// A failure on one node may be what it saw of another node's loss (a rank whose peer stopped
// answering fails before that node's silence is long enough to call it lost). So a failure
// ends the job only once every other node has been heard from since it arrived; a node that
// stays silent is found lost meanwhile (check_silence), and the job ends naming its ranks.
void RendezvousServer::on_failure(int k, const Status& s) {
  if (ending_ || deferred_) return;
  deferred_ = s;
  deferred_node_ = k;
  deferred_at_ = Clock::now();
  settle_deferred();
}

void RendezvousServer::settle_deferred() {
  if (!deferred_ || ending_) return;
  for (size_t m = 0; m < nodes_.size(); ++m) {
    const Node& n = nodes_[m];
    if (static_cast<int>(m) == deferred_node_ || !n.link || !n.link->open() || n.done) continue;
    if (n.link->last_heard() <= deferred_at_) return;
  }
  const Status s = *deferred_;
  deferred_.reset();
  abort(s.code, s.why);
}

void RendezvousServer::node_gone(int k, const std::string& why) {
  Node& n = nodes_[static_cast<size_t>(k)];
  if (n.done || ending_) {
    maybe_finish();
    return;
  }
  abort(1, "lost " + describe_node(k) + ": its launcher's connection ended (" + why + ")");
}

// A node found lost is not waited for: its link goes, so that the job's end does not wait for
// it to report (maybe_finish).
void RendezvousServer::lose(int k, const std::string& why) {
  abort(1, why);
  if (nodes_[static_cast<size_t>(k)].link) nodes_[static_cast<size_t>(k)].link->close(why);
  maybe_finish();
}

void RendezvousServer::check_silence() {
  const auto now = Clock::now();
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = nodes_[k];
    if (!n.link || !n.link->open() || n.done) continue;
    const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - n.link->last_heard());
    if (quiet > t_.node_timeout && !ending_) {
      lose(static_cast<int>(k), "lost " + describe_node(static_cast<int>(k)) + ": nothing heard from its launcher for " +
                                    seconds(quiet) + " (LOOM_NODE_TIMEOUT_MS)");
      return;
    }
  }
  settle_deferred();
}

void RendezvousServer::tick() {
  const auto now = Clock::now();
  if (!welcomed_ && !ending_ && now - started_ > t_.rendezvous_timeout) {
    std::string missing;
    for (size_t k = 0; k < nodes_.size(); ++k)
      if (!nodes_[k].present) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    abort(1, "the rendezvous timed out after " + seconds(t_.rendezvous_timeout) + " (LOOM_RENDEZVOUS_TIMEOUT_MS): node " +
                 missing + " never arrived");
  }
  if (now - last_beat_ >= t_.heartbeat) {
    last_beat_ = now;
    if (welcomed_) broadcast(encode_empty(MsgType::Heartbeat));
  }
  if (welcomed_) check_silence();
  maybe_finish();
}

void RendezvousServer::abort(int code, const std::string& why) {
  if (ending_) return;
  ending_ = true;
  ending_at_ = Clock::now();
  status_ = code;
  reason_ = why;
  broadcast(encode(MsgType::Abort, Status{code, why}));
  for (auto& p : pending_)
    if (p) p->send(encode(MsgType::Reject, Status{code, why}));
  maybe_finish();
}

void RendezvousServer::broadcast(const std::vector<std::byte>& frame) {
  for (auto& n : nodes_)
    if (n.link && n.link->open()) n.link->send(frame);
}

// Finished when every node has reported its end; once the job is ending, nodes whose launchers
// are gone count as ended, and after a node timeout the rest are given up on (their launchers
// end their ranks themselves when they stop hearing from here).
void RendezvousServer::maybe_finish() {
  if (finished_) return;
  bool settled = welcomed_ || ending_;
  for (const auto& n : nodes_) {
    const bool connected = n.link && n.link->open();
    if (!n.done && !(ending_ && !connected) && welcomed_) settled = false;
  }
  if (!settled && !(ending_ && Clock::now() - ending_at_ > t_.node_timeout)) return;
  finished_ = true;
  broadcast(encode(MsgType::Bye, Status{status_, reason_}));
  for (auto& n : nodes_)
    if (n.link) n.link->flush(std::chrono::milliseconds(500));
}

}  // namespace loom::runtime::launch
