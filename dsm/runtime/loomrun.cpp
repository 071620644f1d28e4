// loomrun: starts the processes of one program, on this host or on several, bootstraps them,
// prefixes their output with the rank, and ends the whole job as soon as one process fails
// anywhere. Three forms (launch/options.hpp): -n N on this host; --hosts, which starts one
// launcher per host (here directly, elsewhere through the remote shell) and serves their
// rendezvous; and the rendezvous form, one loomrun per node started by anything (a scheduler,
// a script), meeting over TCP. The job's segments go however it ends.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/launch/hosts.hpp"
#include "loom/dsm/runtime/launch/local_ranks.hpp"
#include "loom/dsm/runtime/launch/node_agent.hpp"
#include "loom/dsm/runtime/launch/options.hpp"
#include "loom/dsm/runtime/launch/rendezvous.hpp"
#include "loom/dsm/runtime/launch/started_nodes.hpp"

namespace {

using namespace loom::runtime::launch;

volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }

void catch_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string signal_reason(int sig) { return "received signal " + std::to_string(sig) + " (" + strsignal(sig) + ")"; }

class Deadline {
 public:
  explicit Deadline(double seconds) : s_(seconds) {}
  bool passed() const { return s_ > 0 && std::chrono::duration<double>(Clock::now() - start_).count() > s_; }
  std::string reason() const {
    char buf[80];
    std::snprintf(buf, sizeof buf, "the job exceeded --timeout %.1f s", s_);
    return buf;
  }

 private:
  double s_;
  Clock::time_point start_ = Clock::now();
};

// -n N on this host: today's loomrun.
int run_here(const Options& o, char** argv) {
  LocalRanks ranks(o, argv);
  Placement p;
  p.size = o.n;
  if (!ranks.set_up(p)) return 1;
  catch_signals();
  if (!ranks.start()) return 1;
  const Deadline deadline(o.timeout_s);
  while (!ranks.finished()) {
    PollSet ps;
    ranks.add_to(ps);
    ps.wait(20);
    ranks.tick();
    if (auto f = ranks.take_failure()) {
      std::fprintf(stderr, "loomrun: %s; terminating the job\n", f->why.c_str());
      ranks.terminate(f->code);
    }
    if (g_signal != 0 && !ranks.terminating()) {
      std::fprintf(stderr, "loomrun: received signal %d; terminating the job\n", static_cast<int>(g_signal));
      ranks.terminate(128 + g_signal);
    }
    if (deadline.passed() && !ranks.terminating()) {
      std::fprintf(stderr, "loomrun: %s; terminating it\n", deadline.reason().c_str());
      ranks.terminate(124);
    }
  }
  ranks.flush_output();
  return ranks.status();
}

// The rendezvous form: this node's launcher; node 0's also serves the rendezvous (unless a
// --hosts launcher started this node and serves it).
int run_node(const Options& o, char** argv) {
  const Timing t = Timing::from_settings();
  std::string host;
  int port = 0;
  split_host_port(o.rendezvous, host, port);
  std::optional<RendezvousServer> server;
  if (o.node_rank == 0 && !o.head_reports) server.emplace(tcp_listen(host, port), o.nodes, t);
  catch_signals();
  NodeAgent agent(o, argv, t);
  if (!agent.join(host, port)) return 1;
  const Deadline deadline(o.timeout_s);
  bool stopped = false;
  while (!agent.finished() || (server && !server->finished())) {
    PollSet ps;
    if (server) server->add_to(ps);
    agent.add_to(ps);
    ps.wait(50);
    if (server) server->tick();
    agent.tick();
    if (!stopped && g_signal != 0) agent.stop(128 + g_signal, signal_reason(g_signal)), stopped = true;
    if (!stopped && deadline.passed()) agent.stop(124, deadline.reason()), stopped = true;
  }
  return agent.status() != 0 ? agent.status() : (server ? server->status() : 0);
}

// --hosts: one node launcher per host, and their rendezvous served here.
int run_hosts(const Options& o, char** argv) {
  const Timing t = Timing::from_settings();
  const std::string addr = rendezvous_address(o.hosts);
  int port = 0;
  RendezvousServer server(tcp_listen(addr, port), static_cast<int>(o.hosts.size()), t);
  catch_signals();
  StartedNodes nodes(o, argv, addr, port);
  if (!nodes.start()) server.abort(1, nodes.failure());
  bool said = false;
  bool stopped = false;
  while (!server.finished() || nodes.running()) {
    PollSet ps;
    server.add_to(ps);
    nodes.add_to(ps);
    ps.wait(50);
    server.tick();
    // Once the job is over the node launchers exit at once; one still running a second later
    // (the remote shell of a host that disappeared) is ended.
    nodes.tick(server.finished(), std::chrono::seconds(1));
    if (auto why = nodes.take_failure(); why && !server.finished()) server.abort(1, *why);
    if (!stopped && g_signal != 0) server.abort(128 + g_signal, signal_reason(g_signal)), stopped = true;
    if (!server.reason().empty() && !said) {
      std::fprintf(stderr, "loomrun: %s; terminating the job\n", server.reason().c_str());
      said = true;
    }
  }
  nodes.flush_output();
  return server.status();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  try {
    if (!o.hosts.empty()) return run_hosts(o, argv);
    if (o.nodes > 0) return run_node(o, argv);
    return run_here(o, argv);
  } catch (const std::exception& e) {
    // A bad setting (LOOM_SWEEP, LOOM_SHM_DIR, ...), an address that cannot be used.
    std::fprintf(stderr, "loomrun: %s\n", e.what());
    return 2;
  }
}
