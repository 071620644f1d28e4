#pragma once
// How an object's operations reach its data (docs/objects.md, "Policies"), and seed 001's
// concurrency levels. Both are run-time values: one binary runs every side of a comparison.
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::objects {

enum class Policy : uint8_t {
  OneSided,      // the bytes live at the owner; every operation is fabric operations, no owner CPU
  OwnerInvoked,  // the operation is shipped to the owner and runs there on local memory
  Cached,        // the object lives in a shared region; operations run on the local copy
  Auto,          // chosen by the cost model (objects/cost_model.hpp), adapted at run time
};
inline constexpr Policy kFixedPolicies[] = {Policy::OneSided, Policy::OwnerInvoked, Policy::Cached};

// Seed 001's levels: writes and reads at once (fully atomic); only writes until a barrier; only
// reads until a barrier; for a Queue, only its host's threads until a barrier (Local: pushes and
// pops at once, on the host's own memory). For a HashMap the writes are inserts and the reads
// finds; for a Queue, pushes and pops. A level is the caller's promise, checked where it is cheap.
enum class Level : uint8_t {
  Atomic,
  PhasalWrite,
  PhasalRead,
  Local,
  PhasalInsert = PhasalWrite,
  PhasalFind = PhasalRead,
  PhasalPush = PhasalWrite,
  PhasalPop = PhasalRead,
};

// "onesided", "invoked", "cached", "auto" (the names of bench_objects' rows).
std::string_view name(Policy p);
// "atomic", "phasal", "local" (the level as a row names it: the operation says which phase).
std::string_view name(Level l);
// Accepts the names above and "one-sided", "owner-invoked"; anything else is an error.
Policy parse_policy(std::string_view s);

}  // namespace loom::objects
