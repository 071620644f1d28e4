#include "loom/objects/policy.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::objects {

std::string_view name(Policy p) {
  switch (p) {
    case Policy::OneSided: return "onesided";
    case Policy::OwnerInvoked: return "invoked";
    case Policy::Cached: return "cached";
    case Policy::Auto: return "auto";
  }
  return "?";
}

std::string_view name(Level l) {
  switch (l) {
    case Level::Atomic: return "atomic";
    case Level::PhasalWrite: case Level::PhasalRead: return "phasal";
    case Level::Local: return "local";
  }
  return "?";
}

Policy parse_policy(std::string_view s) {
  if (s == "onesided" || s == "one-sided") return Policy::OneSided;
  if (s == "invoked" || s == "owner-invoked") return Policy::OwnerInvoked;
  if (s == "cached") return Policy::Cached;
  if (s == "auto") return Policy::Auto;
  fail("objects: unknown policy '", std::string(s), "' (onesided, invoked, cached, auto)");
}

}  // namespace loom::objects
