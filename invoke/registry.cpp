// The registry of functions that remote calls name (invoke/registry.hpp).
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "loom/dsm/common/error.hpp"
#include "loom/invoke/registry.hpp"

namespace loom::invoke {

namespace {
// "auto:<mangled type>" reads as the demangled entry type (it names the lambda and the function
// it was written in); "name:<name>" as the name.
std::string display_name(std::string_view key) {
  if (key.starts_with("name:")) return std::string(key.substr(5));
  if (!key.starts_with("auto:")) return std::string(key);
  std::string mangled(key.substr(5));
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : mangled;
}
}  // namespace

Registry& Registry::instance() {
  static Registry r;  // constructed on first use: entries register during static initialisation
  return r;
}

uint32_t Registry::hash(std::string_view key) {
  uint32_t h = 2166136261u;
  for (char c : key) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h == 0 ? 1 : h;  // 0 is never a function id
}

uint32_t Registry::add(std::string_view key, EntryFn fn, wire::Kind kind, uint32_t capture_size, NamedFn named) {
  uint32_t id = hash(key);
  std::unique_lock<std::shared_mutex> g(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    if (it->second.name == key && it->second.fn == fn && it->second.named == named) return id;
    fail("invoke: function '", key, "' has the same id as '", it->second.name, "' (0x", std::hex, id,
         "); rename one of them");
  }
  entries_.emplace(id, Entry{fn, named, kind, capture_size, std::string(key), display_name(key)});
  return id;
}

bool Registry::lookup(uint32_t id, Entry* out) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  *out = it->second;
  return true;
}

std::vector<std::pair<uint32_t, std::string>> Registry::listing() const {
  std::vector<std::pair<uint32_t, std::string>> out;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    for (const auto& [id, e] : entries_) out.emplace_back(id, e.display);
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t Registry::size() const {
  std::shared_lock<std::shared_mutex> g(mu_);
  return entries_.size();
}

uint32_t register_function(std::string_view name, NamedFn fn) {
  if (fn == nullptr) fail("register_function('", name, "'): null function");
  return Registry::instance().add(std::string("name:") + std::string(name), nullptr, wire::Kind::Named, 0, fn);
}

uint32_t function_id(std::string_view name) { return Registry::hash(std::string("name:") + std::string(name)); }

}  // namespace loom::invoke
