#pragma once
// This build's identity (LOOM_BUILD_ID: the version, and the commit in a git checkout).
#include <string>

#include "loom/version.hpp"

namespace loom::runtime::launch {
inline std::string build_id() { return LOOM_BUILD_ID; }
}  // namespace loom::runtime::launch
