// The coherence policy and the Space's settings.
#include "coherence/space.hpp"
#include "dsm/common/env.hpp"
#include "dsm/common/error.hpp"

namespace loom::coherence {

std::string Policy::name() const {
  return std::string(home == HomePolicy::Floating ? "floating" : "fixed") +
         (invalidation == Invalidation::Timestamp ? "-ts" : "-dir");
}

Policy Policy::parse(const std::string& s) {
  for (auto h : {HomePolicy::Floating, HomePolicy::Fixed})
    for (auto i : {Invalidation::Timestamp, Invalidation::Directory}) {
      Policy p{h, i};
      if (p.name() == s) return p;
    }
  fail("dsm: unknown policy '", s, "' (floating-ts, floating-dir, fixed-ts or fixed-dir)");
}

Config Config::from_env() {
  Config c;
  c.policy = Policy::parse(env::get_string("LOOM_DSM_POLICY", "floating-ts"));
  c.reserve = env::get_size("LOOM_DSM_RESERVE", c.reserve);
  int64_t notices = env::get_int("LOOM_DSM_NOTICES", c.notices);
  if (notices < 4 || notices > 240) fail("LOOM_DSM_NOTICES=", notices, ": must be 4..240");
  c.notices = static_cast<uint32_t>(notices);
  int64_t lease = env::get_int("LOOM_DSM_LEASE", static_cast<int64_t>(c.lease));
  if (lease < 1 || lease > (int64_t{1} << 20)) fail("LOOM_DSM_LEASE=", lease, ": must be 1..2^20");
  c.lease = static_cast<uint64_t>(lease);
  int64_t so = env::get_int("LOOM_DSM_SYNC_OBJECTS", c.sync_objects);
  if (so < 1 || so > (1 << 20)) fail("LOOM_DSM_SYNC_OBJECTS=", so, ": must be 1..2^20");
  c.sync_objects = static_cast<uint32_t>(so);
  return c;
}

}  // namespace loom::coherence
