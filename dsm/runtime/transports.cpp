// The transports of a job, in words.
#include "loom/dsm/runtime/transports.hpp"

#include <map>
#include <sstream>

namespace loom::runtime {

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i != 0) os << ", ";
    os << ranks[i];
    if (j > i) os << "-" << ranks[j];
    i = j + 1;
  }
  return os.str();
}

std::string describe_transports(const JobLayout& layout, const fabric::Provider& provider, int self) {
  std::ostringstream os;
  std::map<int, std::vector<int>> by_host;
  const int n = static_cast<int>(layout.host_of.size());
  for (int r = 0; r < n; ++r) by_host[layout.host_of[static_cast<size_t>(r)]].push_back(r);
  os << "  provider " << provider.info().name << ": " << provider.info().description << "\n";
  for (const auto& [h, ranks] : by_host) os << "  host " << layout.host_names[static_cast<size_t>(h)] << ": " << rank_list(ranks) << "\n";
  // The choice depends only on whether two ranks share a host: one pair of each kind says it.
  std::string within, between;
  for (int r = 0; r < n; ++r) {
    if (r == self) continue;
    std::string& t = layout.same_host(r, self) ? within : between;
    if (t.empty()) t = provider.transport(r);
  }
  if (!within.empty()) os << "  within a host: " << within << "\n";
  if (!between.empty()) os << "  between hosts: " << between << "\n";
  if (n <= 16) {
    os << "  rank " << self << " to ranks 0.." << n - 1 << ":";
    for (int r = 0; r < n; ++r) os << " " << provider.transport(r);
    os << "\n";
  }
  return os.str();
}

}  // namespace loom::runtime
