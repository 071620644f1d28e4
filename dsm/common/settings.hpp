#pragma once
// The settings registry: every LOOM_* environment variable Loom reads is declared once, as a
// Setting (name, type, default, accepted range, one line of documentation), in its layer's
// table, and read through the typed readers below. A value outside its type or range is an
// error naming the variable and what it accepts. `loom-info` prints every table with the
// values in effect; docs/environment.md documents every entry (a test keeps the two equal).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::settings {

enum class Type : uint8_t {
  String,  // any text
  Choice,  // one of the words in `range`, separated by '|'
  Bool,    // 1/0, on/off, yes/no, true/false
  Int,     // a decimal integer in `range` ("lo..hi")
  Size,    // bytes with an optional K, M or G suffix (powers of 1024), in `range` ("lo..hi")
};

struct Setting {
  const char* name;
  Type type;
  const char* fallback;  // the default as text; "" for a default the reader computes
  const char* range;     // Choice: "a|b|c"; Int and Size: "lo..hi"; otherwise ""
  const char* doc;
};

struct Table {
  const char* layer;  // "dsm", "invoke", "coherence", "tests"
  std::span<const Setting* const> settings;
};

// The raw text of a setting, if set (an empty value counts as unset).
std::optional<std::string> raw(const Setting& s);

// Typed readers: the setting's value, or its default when unset. A malformed or out-of-range
// value is an Error naming the variable and what it accepts. The overloads with `fallback`
// serve settings whose default is computed ("" in the table); a set value is checked alike.
std::string get_string(const Setting& s);
std::string get_choice(const Setting& s);
bool get_bool(const Setting& s);
int64_t get_int(const Setting& s);
int64_t get_int(const Setting& s, int64_t fallback);
uint64_t get_size(const Setting& s);

// Parses text as the setting's type and checks its range (what the readers do); returns the
// value as text in canonical form (sizes in bytes, booleans as 1/0).
std::string validate(const Setting& s, const std::string& text);
// What the setting accepts, for messages and loom-info ("4..240", "shm|verbs", "1/0", ...).
std::string accepted(const Setting& s);
const char* type_name(Type t);

// Parsers shared with command-line options (loomrun): sizes with K/M/G suffixes and integers,
// strictly (no sign on sizes, no trailing text, no overflow). `what` names the value in errors.
uint64_t parse_size(const std::string& text, const std::string& what);
int64_t parse_int(const std::string& text, const std::string& what);

// Every LOOM_* variable set in the environment, by name and value.
std::vector<std::pair<std::string, std::string>> loom_environment();

}  // namespace loom::settings
