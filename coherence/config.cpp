// The coherence policy and the Space's settings.
#include "loom/coherence/space.hpp"
#include "loom/coherence/settings.hpp"
#include "loom/dsm/common/error.hpp"

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
  fail("coherence: unknown policy '", s, "' (floating-ts, floating-dir, fixed-ts or fixed-dir)");
}

Config Config::from_env() {
  Config c;
  c.policy = Policy::parse(loom::settings::get_choice(settings::kPolicy));
  c.reserve = loom::settings::get_size(settings::kReserve);
  c.notices = static_cast<uint32_t>(loom::settings::get_int(settings::kNotices));
  c.lease = static_cast<uint64_t>(loom::settings::get_int(settings::kLease));
  c.sync_objects = static_cast<uint32_t>(loom::settings::get_int(settings::kSyncObjects));
  const std::string claims = loom::settings::get_choice(settings::kExclusive);
  c.claims = claims == "off" ? Claims::Off : claims == "always" ? Claims::Always : Claims::Adaptive;
  c.stats = loom::settings::get_bool(settings::kStats);
  c.fault_runs = loom::settings::get_choice(settings::kFaultRuns) == "on";
  c.refresh = loom::settings::get_choice(settings::kRefresh) == "on";
  return c;
}

}  // namespace loom::coherence
