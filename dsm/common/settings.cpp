#include "loom/dsm/common/settings.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "loom/dsm/common/error.hpp"

extern char** environ;

namespace loom::settings {

namespace {

struct Bounds {
  std::string lo, hi;
};

Bounds split_range(const Setting& s) {
  std::string r = s.range;
  auto dots = r.find("..");
  if (dots == std::string::npos) fail("settings: ", s.name, " has no range (table error)");
  return Bounds{r.substr(0, dots), r.substr(dots + 2)};
}

[[noreturn]] void refuse(const Setting& s, const std::string& text, const std::string& why) {
  fail(s.name, "='", text, "' ", why, " (accepted: ", accepted(s), ")");
}

bool parse_bool(const std::string& v, bool& out) {
  if (v == "1" || v == "yes" || v == "on" || v == "true") return out = true, true;
  if (v == "0" || v == "no" || v == "off" || v == "false") return out = false, true;
  return false;
}

// Parses text with `parse` (parse_int or parse_size) and checks it against the range "lo..hi".
template <typename V>
V checked(const Setting& s, const std::string& text, V (*parse)(const std::string&, const std::string&), const char* kind) {
  Bounds b = split_range(s);
  V lo = parse(b.lo, s.name), hi = parse(b.hi, s.name);
  V x;
  try {
    x = parse(text, s.name);
  } catch (const Error&) {
    refuse(s, text, std::string("is not ") + kind);
  }
  if (x < lo || x > hi) refuse(s, text, "is out of range");
  return x;
}

int64_t checked_int(const Setting& s, const std::string& text) { return checked<int64_t>(s, text, parse_int, "an integer"); }
uint64_t checked_size(const Setting& s, const std::string& text) { return checked<uint64_t>(s, text, parse_size, "a size"); }

bool choice_has(const Setting& s, const std::string& v) {
  std::string r = s.range;
  size_t at = 0;
  for (;;) {
    size_t bar = r.find('|', at);
    if (r.substr(at, bar == std::string::npos ? std::string::npos : bar - at) == v) return true;
    if (bar == std::string::npos) return false;
    at = bar + 1;
  }
}

// The value's text, or the default's; a computed default ("") may not be read this way.
std::string text_of(const Setting& s) {
  if (auto v = raw(s)) return *v;
  if (*s.fallback == '\0') fail("settings: ", s.name, " has a computed default; read it with a fallback (table error)");
  return s.fallback;
}

}  // namespace

uint64_t parse_size(const std::string& text, const std::string& what) {
  if (text.empty() || text[0] < '0' || text[0] > '9') fail(what, "='", text, "' is not a size");
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) fail(what, "='", text, "' is too large");
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

int64_t parse_int(const std::string& text, const std::string& what) {
  const char* p = text.c_str();
  if (text.empty() || !(*p == '-' || (*p >= '0' && *p <= '9'))) fail(what, "='", text, "' is not an integer");
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(p, &end, 10);
  if (errno != 0 || end == p || *end != '\0') fail(what, "='", text, "' is not an integer");
  return x;
}

std::optional<std::string> raw(const Setting& s) {
  const char* v = std::getenv(s.name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_string(const Setting& s) { return raw(s).value_or(s.fallback); }

std::string get_choice(const Setting& s) {
  std::string v = text_of(s);
  if (!choice_has(s, v)) refuse(s, v, "is not one of the choices");
  return v;
}

bool get_bool(const Setting& s) {
  std::string v = text_of(s);
  bool out = false;
  if (!parse_bool(v, out)) refuse(s, v, "is not a boolean");
  return out;
}

int64_t get_int(const Setting& s) { return checked_int(s, text_of(s)); }

int64_t get_int(const Setting& s, int64_t fallback) {
  auto v = raw(s);
  return v ? checked_int(s, *v) : fallback;
}

uint64_t get_size(const Setting& s) { return checked_size(s, text_of(s)); }

std::string validate(const Setting& s, const std::string& text) {
  switch (s.type) {
    case Type::String:
      return text;
    case Type::Choice:
      if (!choice_has(s, text)) refuse(s, text, "is not one of the choices");
      return text;
    case Type::Bool: {
      bool b = false;
      if (!parse_bool(text, b)) refuse(s, text, "is not a boolean");
      return b ? "1" : "0";
    }
    case Type::Int:
      return std::to_string(checked_int(s, text));
    case Type::Size:
      return std::to_string(checked_size(s, text));
  }
  return text;
}

std::string accepted(const Setting& s) {
  switch (s.type) {
    case Type::String:
      return "any text";
    case Type::Choice:
      return s.range;
    case Type::Bool:
      return "1/0, on/off, yes/no, true/false";
    case Type::Int:
      return std::string("an integer in ") + s.range;
    case Type::Size:
      return std::string("a size in ") + s.range + " (K, M, G suffixes)";
  }
  return "";
}

const char* type_name(Type t) {
  switch (t) {
    case Type::String: return "string";
    case Type::Choice: return "choice";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Size: return "size";
  }
  return "?";
}

std::vector<std::pair<std::string, std::string>> loom_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "LOOM_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    out.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return out;
}

}  // namespace loom::settings
