// The invocation settings (invoke/settings.hpp).
#include "loom/invoke/config.hpp"
#include "loom/invoke/settings.hpp"

namespace loom::invoke {

Config Config::from_env() {
  Config c;
  c.chunk_size = loom::settings::get_size(settings::kChunkSize);
  c.chunks_per_request = static_cast<uint32_t>(loom::settings::get_int(settings::kChunks));
  c.max_chunks = static_cast<uint32_t>(loom::settings::get_int(settings::kMaxChunks));
  c.helpers = static_cast<uint32_t>(loom::settings::get_int(settings::kHelpers));
  c.direct = loom::settings::get_bool(settings::kDirect);
  c.remote_bells = loom::settings::get_bool(settings::kRemoteBells);
  c.bad_calls = loom::settings::get_choice(settings::kBadCalls) == "report" ? BadCalls::Report : BadCalls::Fail;
  return c;
}

}  // namespace loom::invoke
