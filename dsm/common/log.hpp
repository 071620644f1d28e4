#pragma once
// Minimal leveled logging to stderr. loomrun prefixes every line with the rank, so messages
// need not repeat it. LOOM_LOG=error|warn|info|debug (default warn).
#include <string>

#include "loom/dsm/common/error.hpp"

namespace loom::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3 };

bool enabled(Level l);
void write(Level l, const std::string& msg);
// Whether this process speaks for its host in messages meant to appear once per host
// (the runtime sets it for local rank 0).
void set_host_announcer(bool yes);
bool host_announcer();

template <typename... A>
void error(A&&... a) { if (enabled(Level::Error)) write(Level::Error, detail::concat(std::forward<A>(a)...)); }
template <typename... A>
void warn(A&&... a) { if (enabled(Level::Warn)) write(Level::Warn, detail::concat(std::forward<A>(a)...)); }
template <typename... A>
void info(A&&... a) { if (enabled(Level::Info)) write(Level::Info, detail::concat(std::forward<A>(a)...)); }
template <typename... A>
void debug(A&&... a) { if (enabled(Level::Debug)) write(Level::Debug, detail::concat(std::forward<A>(a)...)); }

}  // namespace loom::log
