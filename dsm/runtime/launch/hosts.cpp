// The --hosts form: this host among the listed ones, the rendezvous address, node commands.
#include "loom/dsm/runtime/launch/hosts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"

namespace loom::runtime::launch {

namespace {

std::vector<in_addr> addresses_of(const std::string& host) {
  std::vector<in_addr> out;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) out.push_back(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
  freeaddrinfo(res);
  return out;
}

bool is_local_address(in_addr a) {
  if ((ntohl(a.s_addr) >> 24) == 127) return true;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i != nullptr && !found; i = i->ifa_next)
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET)
      found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a.s_addr;
  freeifaddrs(ifs);
  return found;
}

}  // namespace

bool is_this_host(const std::string& host) {
  if (host == "localhost") return true;
  char me[256] = {};
  gethostname(me, sizeof me - 1);
  const std::string name = me;
  if (host == name || host == name.substr(0, name.find('.'))) return true;
  const auto addrs = addresses_of(host);
  return !addrs.empty() && is_local_address(addrs.front());
}

std::string rendezvous_address(const std::vector<HostSlot>& hosts) {
  if (auto a = settings::raw(settings::dsm::kRendezvousAddr)) return *a;
  const HostSlot* other = nullptr;
  for (const auto& h : hosts)
    if (!is_this_host(h.host)) {
      other = &h;
      break;
    }
  if (other == nullptr) return "127.0.0.1";
  const auto addrs = addresses_of(other->host);
  if (addrs.empty()) fail("--hosts: cannot resolve the host '", other->host, "'");
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  to.sin_addr = addrs.front();
  sockaddr_in me{};
  socklen_t len = sizeof me;
  const bool ok = s >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
                  getsockname(s, reinterpret_cast<sockaddr*>(&me), &len) == 0;
  if (s >= 0) ::close(s);
  if (!ok) fail("--hosts: no route from this host to ", other->host, " (set LOOM_RENDEZVOUS_ADDR to this host's address there)");
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &me.sin_addr, buf, sizeof buf);
  return buf;
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=:,+@%") ==
                           std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail_errno("loomrun: cannot find its own path");
  return std::string(buf, static_cast<size_t>(n));
}

std::vector<std::string> node_command(const Options& o, char** argv, int k, const std::string& addr, int port) {
  std::vector<std::string> c{self_path(), "--nodes", std::to_string(o.hosts.size()), "--node-rank", std::to_string(k),
                             "--rendezvous", addr + ":" + std::to_string(port), "-n",
                             std::to_string(o.hosts[static_cast<size_t>(k)].procs), "--head-reports"};
  if (!o.threads.empty()) c.insert(c.end(), {"--threads", o.threads});
  if (!o.provider.empty()) c.insert(c.end(), {"--provider", o.provider});
  if (!o.map_by.empty()) c.insert(c.end(), {"--map-by", o.map_by});
  if (o.timeout_s > 0) c.insert(c.end(), {"--timeout", std::to_string(o.timeout_s)});
  if (!o.prefix) c.push_back("--no-prefix");
  if (o.same_layout) c.push_back("--same-layout");
  c.push_back("--");
  for (char** a = argv + o.program; *a != nullptr; ++a) c.emplace_back(*a);
  return c;
}

std::vector<std::string> remote_command(const Options& o, const std::string& host, const std::vector<std::string>& node_argv) {
  std::string rsh = o.rsh;
  if (rsh.empty()) rsh = settings::get_string(settings::dsm::kRsh);
  std::vector<std::string> out;
  std::stringstream words(rsh);
  for (std::string w; words >> w;) out.push_back(w);
  if (out.empty()) fail("--rsh: an empty remote shell");
  out.push_back(host);
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) fail_errno("loomrun: getcwd");
  std::string cmd = "cd " + shell_quote(cwd) + " && env";
  // The job's LOOM_* settings travel; the ones each launcher sets for its ranks do not.
  static const char* const kPerRank[] = {"LOOM_RANK", "LOOM_SIZE", "LOOM_LOCAL_RANK", "LOOM_LOCAL_SIZE", "LOOM_JOB_ID",
                                         "LOOM_JOB_DIR", "LOOM_NODE", "LOOM_NODES", "LOOM_BOOT_FD"};
  for (const auto& [name, value] : settings::loom_environment()) {
    bool per_rank = false;
    for (const char* p : kPerRank) per_rank = per_rank || name == p;
    if (!per_rank) cmd += " " + shell_quote(name + "=" + value);
  }
  for (const auto& name : o.pass_env)
    if (const char* v = std::getenv(name.c_str())) cmd += " " + shell_quote(name + "=" + v);
  for (const auto& w : node_argv) cmd += " " + shell_quote(w);
  out.push_back(cmd);
  return out;
}

}  // namespace loom::runtime::launch
