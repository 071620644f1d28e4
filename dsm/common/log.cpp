#include "dsm/common/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "dsm/common/env.hpp"

namespace loom::log {

namespace {
Level configured() {
  static const Level level = [] {
    std::string v = env::get_string("LOOM_LOG", "warn");
    if (v == "error") return Level::Error;
    if (v == "info") return Level::Info;
    if (v == "debug") return Level::Debug;
    return Level::Warn;
  }();
  return level;
}
}  // namespace

namespace {
std::atomic<bool> g_announcer{true};
}
void set_host_announcer(bool yes) { g_announcer.store(yes); }
bool host_announcer() { return g_announcer.load(); }

bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(configured()); }

void write(Level l, const std::string& msg) {
  static std::mutex mu;
  static const char* names[] = {"error", "warning", "info", "debug"};
  std::lock_guard<std::mutex> g(mu);
  std::fprintf(stderr, "loom %s: %s\n", names[static_cast<int>(l)], msg.c_str());
  std::fflush(stderr);
}

}  // namespace loom::log
