#include "loom/invoke/checks.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/fault_report.hpp"
#include "loom/dsm/common/log.hpp"

namespace loom::invoke {

namespace detail {
thread_local const RunningCall* t_running = nullptr;
}

namespace {

uint64_t digest(const std::vector<std::pair<uint32_t, std::string>>& listing) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  };
  for (const auto& [id, name] : listing) {
    mix(&id, sizeof id);
    mix(name.data(), name.size());
  }
  return h;
}

// One process's registry on the wire: ids (u32), then the names, each ending in '\0'.
std::vector<std::byte> encode(const std::vector<std::pair<uint32_t, std::string>>& listing) {
  std::vector<std::byte> out(sizeof(uint32_t) * (listing.size() + 1));
  uint32_t n = static_cast<uint32_t>(listing.size());
  std::memcpy(out.data(), &n, 4);
  for (size_t i = 0; i < listing.size(); ++i) std::memcpy(out.data() + 4 * (i + 1), &listing[i].first, 4);
  for (const auto& e : listing) {
    const auto* b = reinterpret_cast<const std::byte*>(e.second.c_str());
    out.insert(out.end(), b, b + e.second.size() + 1);
  }
  return out;
}

// The other side of encode; the bytes come from another process, so every length is checked.
std::map<uint32_t, std::string> decode(const std::vector<std::byte>& in, int rank) {
  uint32_t n = 0;
  if (in.size() < 4) fail("invoke: rank ", rank, " sent a truncated function registry");
  std::memcpy(&n, in.data(), 4);
  if (in.size() < 4 * (size_t{n} + 1)) fail("invoke: rank ", rank, " sent a truncated function registry");
  std::map<uint32_t, std::string> out;
  size_t at = 4 * (size_t{n} + 1);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t id;
    std::memcpy(&id, in.data() + 4 * (i + 1), 4);
    auto end = std::find(in.begin() + static_cast<std::ptrdiff_t>(at), in.end(), std::byte{0});
    if (end == in.end()) fail("invoke: rank ", rank, " sent a truncated function registry");
    out[id].assign(reinterpret_cast<const char*>(in.data() + at), static_cast<size_t>(end - in.begin()) - at);
    at = static_cast<size_t>(end - in.begin()) + 1;
  }
  return out;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  return os.str();
}

// Each function some process lacks: its name, who lacks it, who has it.
std::string differences(const std::vector<std::map<uint32_t, std::string>>& all) {
  std::map<uint32_t, std::string> names;
  for (const auto& m : all) names.insert(m.begin(), m.end());
  std::ostringstream os;
  int lines = 0;
  for (const auto& [id, name] : names) {
    std::vector<int> have, lack;
    for (size_t r = 0; r < all.size(); ++r) (all[r].count(id) ? have : lack).push_back(static_cast<int>(r));
    if (lack.empty()) continue;
    if (++lines > 8) {
      os << "\n  ...";
      break;
    }
    os << "\n  '" << name << "': registered on rank" << (have.size() > 1 ? "s " : " ") << ranks_text(have)
       << ", missing on rank" << (lack.size() > 1 ? "s " : " ") << ranks_text(lack);
  }
  return os.str();
}

size_t describe_running_call(char* buf, size_t cap) {
  const RunningCall* running = detail::t_running;
  if (running == nullptr || running->entry == nullptr) return 0;
  const RunningCall& c = *running;
  size_t n = fault::append(buf, 0, cap, "in a remotely called function, ");
  n = fault::append(buf, n, cap, c.entry->display.c_str());
  n = fault::append(buf, n, cap, ", run for rank ");
  n = fault::append(buf, n, cap, static_cast<long long>(c.src_rank));
  n = fault::append(buf, n, cap, " on thread ");
  n = fault::append(buf, n, cap, static_cast<long long>(c.index));
  return fault::append(buf, n, cap,
                       " (a call's captures are copied from the caller: a pointer into the caller's own memory "
                       "means nothing in this process; pass registered memory, a region address or the bytes)");
}

}  // namespace

void compare_registries(Runtime& rt, BadCalls mode) {
  const auto listing = Registry::instance().listing();
  const auto digests = rt.bootstrap().allgather_value(digest(listing));
  if (std::all_of(digests.begin(), digests.end(), [&](uint64_t d) { return d == digests[0]; })) return;
  // They differ: every process learns every registry, and all say the same.
  const auto blobs = rt.bootstrap().allgather(encode(listing));
  std::vector<std::map<uint32_t, std::string>> all;
  for (size_t r = 0; r < blobs.size(); ++r) all.push_back(decode(blobs[r], static_cast<int>(r)));
  const std::string what = "invoke: the processes' function registries differ (a call to a function its "
                           "receiver lacks would fail there):" + differences(all);
  if (mode == BadCalls::Fail) fail(what, "\n  (LOOM_INVOKE_BAD_CALLS=report: a warning instead)");
  if (rt.rank() == 0) log::warn(what);
}

void describe_faults_in_calls() { fault::add_describer(&describe_running_call); }

std::string describe_unrun(int rank, int index, const Unrun& unrun) {
  uint64_t total = 0;
  for (const auto& [name, n] : unrun) total += n;
  std::ostringstream os;
  os << "invoke: " << total << " call" << (total == 1 ? "" : "s") << " to thread " << rank << "/" << index
     << " never ran (the thread stopped polling before they arrived; Invoker::barrier() runs every call "
        "made before it):";
  int lines = 0;
  for (const auto& [name, n] : unrun) {
    if (++lines > 8) {
      os << "\n  ...";
      break;
    }
    os << "\n  " << n << " x " << name;
  }
  return os.str();
}

}  // namespace loom::invoke
