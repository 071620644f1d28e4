#include "loom/dsm/common/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "loom/dsm/common/dsm_settings.hpp"

namespace loom::log {

namespace {
Level configured() {
  static const Level level = [] {
    // A malformed LOOM_LOG is refused by the Runtime's constructor; here it reads as warn.
    std::string v;
    try {
      v = settings::get_choice(settings::dsm::kLog);
    } catch (const std::exception&) {
      v = "warn";
    }
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
