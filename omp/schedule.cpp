#include "loom/omp/schedule.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <type_traits>

#include "loom/dsm/common/error.hpp"

namespace loom::omp {
namespace {

std::string trimmed_lower(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  std::string out = s.substr(a, b - a);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A positive decimal integer up to `max`, or nullopt.
std::optional<int64_t> positive(const std::string& text, int64_t max) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  const int64_t v = std::strtoll(text.c_str(), nullptr, 10);
  if (v < 1 || v > max) return std::nullopt;
  return v;
}

}  // namespace

Schedule parse_schedule(const std::string& text, const std::string& what) {
  auto bad = [&](const char* why) -> Schedule {
    fail(what, " '", text, "': ", why, " (expected [monotonic:|nonmonotonic:]static|dynamic|guided|auto[,chunk])");
  };
  std::string s = trimmed_lower(text);
  Schedule out;
  if (auto colon = s.find(':'); colon != std::string::npos) {
    const std::string modifier = trimmed_lower(s.substr(0, colon));
    if (modifier == "monotonic") out.monotonic = true;
    else if (modifier != "nonmonotonic") return bad("unknown modifier");
    s = trimmed_lower(s.substr(colon + 1));
  }
  std::string kind = s;
  if (auto comma = s.find(','); comma != std::string::npos) {
    kind = trimmed_lower(s.substr(0, comma));
    auto chunk = positive(trimmed_lower(s.substr(comma + 1)), int64_t{1} << 40);
    if (!chunk) return bad("the chunk must be a positive integer");
    out.chunk = *chunk;
  }
  if (kind == "static") out.kind = ScheduleKind::Static;
  else if (kind == "dynamic") out.kind = ScheduleKind::Dynamic;
  else if (kind == "guided") out.kind = ScheduleKind::Guided;
  else if (kind == "auto") out.kind = ScheduleKind::Auto;
  else return bad("unknown kind");
  if (out.kind == ScheduleKind::Auto && out.chunk != 0) return bad("auto takes no chunk");
  return out;
}

std::vector<int> parse_num_threads(const std::string& text, const std::string& what) {
  std::vector<int> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string part = trimmed_lower(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    auto v = positive(part, 1 << 20);
    if (!v) fail(what, " '", text, "': each entry must be a positive thread count");
    out.push_back(static_cast<int>(*v));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

template <typename T>
uint64_t LoopBounds<T>::count(bool up) const {
  if constexpr (std::is_signed_v<T>) {
    if (step == 0) fail("omp: a loop with step 0");
    const __int128 span = static_cast<__int128>(end) - start;
    if ((step > 0 && span <= 0) || (step < 0 && span >= 0)) return 0;
    const __int128 s = step;
    return static_cast<uint64_t>((span + s - (s > 0 ? 1 : -1)) / s);
  } else {
    if (step == 0) fail("omp: a loop with step 0");
    if (up) {
      if (end <= start) return 0;
      return (static_cast<uint64_t>(end - start) + step - 1) / step;
    }
    if (start <= end) return 0;
    const uint64_t down = static_cast<uint64_t>(-step);  // the magnitude of a negative step
    return (static_cast<uint64_t>(start - end) + down - 1) / down;
  }
}

template struct LoopBounds<int64_t>;
template struct LoopBounds<uint64_t>;

std::optional<IterRange> static_range(uint64_t n, int threads, int thread, uint64_t chunk, uint64_t trip) {
  if (threads < 1 || thread < 0 || thread >= threads) fail("omp: thread ", thread, " of ", threads, " in a static schedule");
  const auto t = static_cast<uint64_t>(thread), nt = static_cast<uint64_t>(threads);
  if (chunk == 0) {
    if (trip != 0) return std::nullopt;
    uint64_t q = n / nt, extra = n % nt, first;
    if (t < extra) {
      ++q;
      first = q * t;
    } else {
      first = q * t + extra;
    }
    if (q == 0) return std::nullopt;
    return IterRange{first, first + q};
  }
  // The trip-th chunk of this thread is chunk number trip * threads + thread.
  const unsigned __int128 index = static_cast<unsigned __int128>(trip) * nt + t;
  const unsigned __int128 first = index * chunk;
  if (first >= n) return std::nullopt;
  return IterRange{static_cast<uint64_t>(first), static_cast<uint64_t>(std::min<unsigned __int128>(first + chunk, n))};
}

uint64_t guided_chunk(uint64_t remaining, int threads, uint64_t chunk) {
  if (threads < 1) fail("omp: a guided schedule for ", threads, " threads");
  const uint64_t nt = static_cast<uint64_t>(threads);
  uint64_t q = remaining / nt + (remaining % nt != 0 ? 1 : 0);
  q = std::max<uint64_t>(q, std::max<uint64_t>(chunk, 1));
  return std::min(q, remaining);
}

}  // namespace loom::omp
