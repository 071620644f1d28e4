#pragma once
// LOOM_* environment settings. Every variable read here is listed in docs/environment.md;
// a malformed value is an error naming the variable, never silently ignored.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <utility>

namespace loom::env {

std::optional<std::string> get(const char* name);
std::string get_string(const char* name, const std::string& fallback);
int64_t get_int(const char* name, int64_t fallback);
bool get_bool(const char* name, bool fallback);
// Accepts suffixes K, M, G (powers of 1024).
uint64_t get_size(const char* name, uint64_t fallback);
uint64_t parse_size(const std::string& text, const char* what);

// Every LOOM_* variable currently set, for loom-info style reports.
std::vector<std::pair<std::string, std::string>> all_loom_settings();

}  // namespace loom::env
