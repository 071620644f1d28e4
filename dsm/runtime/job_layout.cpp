// Every rank's place in the job, exchanged at start-up: hosts and builds.
#include "loom/dsm/runtime/job_layout.hpp"

#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "loom/dsm/common/error.hpp"
#include "loom/version.hpp"

namespace loom::runtime {

RankPlace this_place(const std::string& job_id, const std::string& job_dir) {
  RankPlace p;
  p.pid = static_cast<int>(getpid());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, p.boot_id);
  if (p.boot_id.empty()) p.boot_id = "unknown";
  p.job_id = job_id;
  p.job_dir = job_dir;
  p.build = LOOM_BUILD_ID;
  return p;
}

// Fields one a line; none may hold a line break.
std::string encode_place(const RankPlace& p) {
  std::string out = std::to_string(p.pid);
  for (const std::string* f : {&p.host, &p.boot_id, &p.job_id, &p.job_dir, &p.build}) {
    if (f->find('\n') != std::string::npos) fail("bootstrap: a line break in '", *f, "'");
    out += "\n" + *f;
  }
  return out;
}

RankPlace decode_place(std::span<const std::byte> bytes, int rank) {
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::vector<std::string> f;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) f.push_back(line);
  if (!text.empty() && text.back() == '\n') f.push_back("");
  if (f.size() != 6) fail("bootstrap: rank ", rank, " sent a malformed place (", f.size(), " fields)");
  RankPlace p;
  size_t used = 0;
  long pid = 0;
  try {
    pid = std::stol(f[0], &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != f[0].size() || pid <= 0 || pid > 0x7fffffff) fail("bootstrap: rank ", rank, " sent a malformed process id '", f[0], "'");
  p.pid = static_cast<int>(pid);
  p.host = f[1];
  p.boot_id = f[2];
  p.job_id = f[3];
  p.job_dir = f[4];
  p.build = f[5];
  if (p.host.empty() || p.job_dir.empty()) fail("bootstrap: rank ", rank, " sent no host or no job directory");
  return p;
}

JobLayout make_layout(std::vector<RankPlace> ranks) {
  JobLayout l;
  for (size_t r = 1; r < ranks.size(); ++r)
    if (ranks[r].build != ranks[0].build)
      fail("rank ", r, " (on ", ranks[r].host, ") runs Loom build '", ranks[r].build, "' and rank 0 (on ", ranks[0].host,
           ") runs '", ranks[0].build, "': every rank must run the same build");
  std::map<std::pair<std::string, std::string>, int> hosts;
  for (const auto& p : ranks) hosts.emplace(std::make_pair(p.host, p.boot_id), 0);
  int i = 0;
  for (auto& [key, index] : hosts) {
    index = i++;
    l.host_names.push_back(key.first);
  }
  for (const auto& p : ranks) l.host_of.push_back(hosts.at({p.host, p.boot_id}));
  l.ranks = std::move(ranks);
  return l;
}

}  // namespace loom::runtime
