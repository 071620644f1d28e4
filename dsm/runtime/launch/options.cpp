// loomrun's command line: the three launch forms, host lists and hostfiles.
#include "loom/dsm/runtime/launch/options.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime::launch {

void usage() {
  std::fprintf(stderr,
               "usage: loomrun -n N [options] [--] program [args...]\n"
               "       loomrun --hosts HOST[:N],... | --hostfile FILE [--rsh CMD] [options] [--] program [args...]\n"
               "       loomrun --nodes N --node-rank R --rendezvous HOST:PORT -n P [options] [--] program [args...]\n"
               "  -n N            processes (on this node, in the rendezvous form) (1..1024)\n"
               "  --hosts LIST    processes on each host (HOST:N, comma-separated; N defaults to 1);\n"
               "                  remote hosts are started with the remote shell, this host directly\n"
               "  --hostfile F    the same from a file: one 'HOST', 'HOST:N' or 'HOST slots=N' a line\n"
               "  --rsh CMD       the remote shell (default LOOM_RSH, else ssh): CMD HOST COMMAND\n"
               "  -x NAME         pass the variable NAME to remote nodes (LOOM_* are always passed)\n"
               "  --nodes N       nodes in the job (rendezvous form), each running one loomrun\n"
               "  --node-rank R   this node's index, 0..N-1 (node 0 serves the rendezvous)\n"
               "  --rendezvous H:P  where the nodes meet (TCP; node 0 listens on it)\n"
               "  --threads T     worker threads per process (sets LOOM_THREADS)\n"
               "  --map-by M      where threads and memory go: core (the cores in order), zone (a NUMA\n"
               "                  zone per process), spread (a process's threads over every zone); sets LOOM_MAP_BY\n"
               "  --provider P    fabric provider (sets LOOM_PROVIDER)\n"
               "  --emulate-nodes K  split the ranks over K emulated nodes joined by the wire\n"
               "                  LOOM_WIRE names (one host, shm; sets LOOM_EMULATE_NODES)\n"
               "  --same-layout   start every process without address randomization, so the same\n"
               "                  program has its code, data and heap at the same addresses in each\n"
               "                  (for sharing globals in place: Space::share_in_place)\n"
               "  --timeout S     end the job with an error after S seconds\n"
               "  --no-prefix     do not prefix output lines with [rank]\n");
}

namespace {

[[noreturn]] void bad_usage(const std::string& why) {
  std::fprintf(stderr, "loomrun: %s\n", why.c_str());
  usage();
  std::exit(2);
}

std::string parse_map_by_option(const std::string& v) {
  if (v != "core" && v != "zone" && v != "spread") bad_usage("--map-by '" + v + "' must be core, zone or spread");
  return v;
}

// A positive number of seconds; anything else (text, a sign, nan, inf, 0) is refused.
double parse_timeout(const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x <= 0)
    bad_usage("--timeout '" + v + "' must be a positive number of seconds");
  return x;
}

int parse_number(const std::string& v, const char* what, long lo, long hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    bad_usage(std::string(what) + " '" + v + "' must be " + std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(x);
}

HostSlot host_slot(const std::string& host, const std::string& count, const std::string& what) {
  if (host.empty()) fail(what, ": an empty host name");
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      fail(what, ": '", host, "' is not a host name or IPv4 address");
  HostSlot s{host, 1};
  if (!count.empty()) {
    char* end = nullptr;
    long n = std::strtol(count.c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > 1024) fail(what, ": '", count, "' processes for ", host, " (1..1024)");
    s.procs = static_cast<int>(n);
  }
  return s;
}

void check_total(const std::vector<HostSlot>& hosts, const std::string& what) {
  if (hosts.empty()) fail(what, ": no hosts");
  long total = 0;
  for (const auto& h : hosts) total += h.procs;
  if (total > 32767) fail(what, ": ", total, " processes in all (limit 32767)");
}

}  // namespace

std::vector<HostSlot> parse_host_list(const std::string& text) {
  std::vector<HostSlot> out;
  size_t start = 0;
  for (;;) {  // every item between commas, empty ones included (an error)
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto colon = item.find(':');
    out.push_back(colon == std::string::npos ? host_slot(item, "", "--hosts")
                                             : host_slot(item.substr(0, colon), item.substr(colon + 1), "--hosts"));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  check_total(out, "--hosts '" + text + "'");
  return out;
}

std::vector<HostSlot> parse_hostfile_text(const std::string& text, const std::string& what) {
  std::vector<HostSlot> out;
  std::stringstream lines(text);
  std::string line;
  int lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::stringstream words(line);
    std::string host, count, extra;
    if (!(words >> host)) continue;
    words >> count >> extra;
    const std::string where = what + " line " + std::to_string(lineno);
    if (!extra.empty()) fail(where, ": '", extra, "' after the host and its count");
    if (count.rfind("slots=", 0) == 0) count = count.substr(6);
    if (auto colon = host.find(':'); colon != std::string::npos) {
      if (!count.empty()) fail(where, ": two counts for ", host);
      count = host.substr(colon + 1);
      host.resize(colon);
    }
    out.push_back(host_slot(host, count, where));
  }
  check_total(out, what);
  return out;
}

void split_host_port(const std::string& text, std::string& host, int& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) fail("--rendezvous '", text, "' must be HOST:PORT");
  host = text.substr(0, colon);
  char* end = nullptr;
  const long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 1 || p > 65535) fail("--rendezvous '", text, "': the port must be 1..65535");
  port = static_cast<int>(p);
}

Options parse_options(int argc, char** argv) {
  Options o;
  int i = 1;
  auto value = [&](const char* what) -> std::string {
    if (i + 1 >= argc) bad_usage(std::string(what) + " needs a value");
    return argv[++i];
  };
  std::string hostfile;
  try {
    for (; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "-n" || a == "-np") o.n = parse_number(value("-n"), "-n", 1, 1024);
      else if (a == "--threads") o.threads = value("--threads");
      else if (a == "--provider") o.provider = value("--provider");
      else if (a == "--map-by") o.map_by = parse_map_by_option(value("--map-by"));
      else if (a == "--emulate-nodes") o.emulate_nodes = parse_number(value("--emulate-nodes"), "--emulate-nodes", 1, 1024);
      else if (a == "--timeout") o.timeout_s = parse_timeout(value("--timeout"));
      else if (a == "--no-prefix") o.prefix = false;
      else if (a == "--same-layout") o.same_layout = true;
      else if (a == "--hosts") o.hosts = parse_host_list(value("--hosts"));
      else if (a == "--hostfile") hostfile = value("--hostfile");
      else if (a == "--rsh") o.rsh = value("--rsh");
      else if (a == "-x") o.pass_env.push_back(value("-x"));
      else if (a == "--nodes") o.nodes = parse_number(value("--nodes"), "--nodes", 1, 4096);
      else if (a == "--node-rank") o.node_rank = parse_number(value("--node-rank"), "--node-rank", 0, 4095);
      else if (a == "--rendezvous") o.rendezvous = value("--rendezvous");
      else if (a == "--head-reports") o.head_reports = true;
      else if (a == "-h" || a == "--help") usage(), std::exit(0);
      else if (a == "--") { ++i; break; }  // the program follows, even if it starts with '-'
      else if (!a.empty() && a[0] == '-') bad_usage("unknown option " + a);
      else break;
    }
    if (!hostfile.empty()) {
      if (!o.hosts.empty()) bad_usage("--hosts and --hostfile exclude each other");
      std::ifstream f(hostfile);
      if (!f) bad_usage("cannot read the hostfile " + hostfile);
      std::stringstream text;
      text << f.rdbuf();
      o.hosts = parse_hostfile_text(text.str(), "hostfile " + hostfile);
    }
    if (!o.rendezvous.empty()) {
      std::string h;
      int p;
      split_host_port(o.rendezvous, h, p);
    }
  } catch (const Error& e) {
    bad_usage(e.what());
  }
  const bool rdv = o.nodes > 0 || o.node_rank >= 0 || !o.rendezvous.empty();
  if (rdv && (o.nodes == 0 || o.node_rank < 0 || o.rendezvous.empty()))
    bad_usage("the rendezvous form needs --nodes, --node-rank and --rendezvous together");
  if (rdv && o.node_rank >= o.nodes) bad_usage("--node-rank " + std::to_string(o.node_rank) + " is not below --nodes " + std::to_string(o.nodes));
  if (rdv && !o.hosts.empty()) bad_usage("--hosts and the rendezvous form exclude each other");
  if (!o.hosts.empty()) {
    int total = 0;
    for (const auto& h : o.hosts) total += h.procs;
    if (o.n >= 0 && o.n != total)
      bad_usage("-n " + std::to_string(o.n) + " differs from the " + std::to_string(total) + " processes the hosts list");
    o.n = total;
  }
  if (o.n < 0) bad_usage("-n is required");
  if (o.emulate_nodes > 0 && (rdv || !o.hosts.empty()))
    bad_usage("--emulate-nodes emulates nodes on this host; the ranks of --hosts and the rendezvous form are on real ones");
  if (o.emulate_nodes > o.n)
    bad_usage("--emulate-nodes " + std::to_string(o.emulate_nodes) + " exceeds the " + std::to_string(o.n) + " ranks (-n)");
  if (i >= argc) bad_usage("no program to run");
  o.program = i;
  return o;
}

}  // namespace loom::runtime::launch
