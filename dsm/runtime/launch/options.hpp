#pragma once
// loomrun's command line. Three forms:
//   loomrun -n N prog ...                                   N ranks on this host
//   loomrun --hosts A:2,B:2 [--rsh CMD] prog ...            (or --hostfile FILE) ranks on each
//                                                           host, remote ones started over ssh
//   loomrun --nodes N --node-rank R --rendezvous H:P -n P prog ...   one launcher per node,
//                                                           meeting at H:P (node rank 0 serves it)
#include <string>
#include <vector>

namespace loom::runtime::launch {

struct HostSlot {
  std::string host;
  int procs = 1;
};

struct Options {
  int n = -1;                     // ranks (on this node, in the rendezvous form)
  std::string threads, provider;
  std::string map_by;             // empty: LOOM_MAP_BY as set (--map-by sets it)
  int emulate_nodes = 0;          // 0: none (--emulate-nodes K sets LOOM_EMULATE_NODES)
  double timeout_s = 0;           // 0: none
  bool prefix = true;
  bool same_layout = false;       // children start with ADDR_NO_RANDOMIZE
  int program = 0;                // argv index of the program
  // --hosts / --hostfile
  std::vector<HostSlot> hosts;
  std::string rsh;                // empty: LOOM_RSH, else ssh
  std::vector<std::string> pass_env;  // -x NAME: passed to remote nodes besides LOOM_*
  // --nodes / --node-rank / --rendezvous
  int nodes = 0;                  // 0: not the rendezvous form
  int node_rank = -1;
  std::string rendezvous;         // HOST:PORT
  bool head_reports = false;      // started by a --hosts launcher, which reports the job's end
};

// Parses argv; prints usage and exits with status 2 on a bad command line.
Options parse_options(int argc, char** argv);

// "a:2,b,c:4" (a host without a count has 1 slot).
std::vector<HostSlot> parse_host_list(const std::string& text);
// A hostfile: one host a line, "host", "host:N", "host N" or "host slots=N"; '#' starts a comment.
std::vector<HostSlot> parse_hostfile_text(const std::string& text, const std::string& what);
// "host:port" (IPv4 address or name; port 1..65535).
void split_host_port(const std::string& text, std::string& host, int& port);

void usage();

}  // namespace loom::runtime::launch
