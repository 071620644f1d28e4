#include "dsm/common/env.hpp"

#include <cstdlib>
#include <cstring>

#include "dsm/common/error.hpp"

extern char** environ;

namespace loom::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_string(const char* name, const std::string& fallback) {
  return get(name).value_or(fallback);
}

int64_t get_int(const char* name, int64_t fallback) {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *end != '\0')
    fail(name, "='", *v, "' is not an integer");
  return x;
}

bool get_bool(const char* name, bool fallback) {
  auto v = get(name);
  if (!v) return fallback;
  if (*v == "1" || *v == "yes" || *v == "on" || *v == "true") return true;
  if (*v == "0" || *v == "no" || *v == "off" || *v == "false") return false;
  fail(name, "='", *v, "' is not a boolean (use 1/0, on/off, yes/no, true/false)");
}

uint64_t parse_size(const std::string& text, const char* what) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) fail(what, "='", text, "' is not a size");
  uint64_t mul = 1;
  std::string suffix(end);
  if (suffix == "" || suffix == "B") mul = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") mul = 1ull << 30;
  else fail(what, "='", text, "' has an unknown suffix (use K, M or G)");
  if (x > (~0ull) / mul) fail(what, "='", text, "' is too large");
  return x * mul;
}

uint64_t get_size(const char* name, uint64_t fallback) {
  auto v = get(name);
  if (!v) return fallback;
  return parse_size(*v, name);
}

std::vector<std::pair<std::string, std::string>> all_loom_settings() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "LOOM_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    out.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return out;
}

}  // namespace loom::env
