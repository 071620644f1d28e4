// Settings values (dsm/common/settings): any text a user puts in a LOOM_* variable is a clear
// error or a value that prints back to the same number (no truncation, wrap or sign flip).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/settings.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    int64_t v = loom::settings::parse_int(text, "LOOM_FUZZ");
    if (loom::settings::parse_int(std::to_string(v), "LOOM_FUZZ") != v) std::abort();
  } catch (const loom::Error&) {
  }
  try {
    uint64_t v = loom::settings::parse_size(text, "LOOM_FUZZ");
    if (loom::settings::parse_size(std::to_string(v), "LOOM_FUZZ") != v) std::abort();
  } catch (const loom::Error&) {
  }
  return 0;
}
