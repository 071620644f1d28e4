#pragma once
// The coherence protocol's settings (read by coherence::Config::from_env).
#include "loom/dsm/common/settings_check.hpp"

namespace loom::coherence::settings {

using loom::settings::Setting;
using T = loom::settings::Type;

inline constexpr Setting kPolicy{"LOOM_COHERENCE_POLICY", T::Choice, "floating-ts", "floating-ts|floating-dir|fixed-ts|fixed-dir",
                                 "coherence policy (home x invalidation)"};
inline constexpr Setting kReserve{"LOOM_COHERENCE_RESERVE", T::Size, "16G", "2M..16384G",
                                  "address space reserved for shared regions (a multiple of 2M)"};
inline constexpr Setting kNotices{"LOOM_COHERENCE_NOTICES", T::Int, "128", "4..240", "write notices a process keeps"};
inline constexpr Setting kLease{"LOOM_COHERENCE_LEASE", T::Int, "16", "1..1048576", "logical lease length (timestamp policies)"};
inline constexpr Setting kSyncObjects{"LOOM_COHERENCE_SYNC_OBJECTS", T::Int, "1024", "1..1048576", "locks and atomic words per Space"};

inline constexpr Setting kExclusive{"LOOM_COHERENCE_EXCLUSIVE", T::Choice, "adaptive", "off|adaptive|always",
                                    "a releaser keeps a block nobody shares writable in place (exclusive blocks); always: every release claims (tests)"};

inline constexpr Setting kStats{"LOOM_COHERENCE_STATS", T::Bool, "0", "",
                                "each process prints its counters (protocol and kernel work, per interval) when its Space ends"};
inline constexpr Setting kFaultRuns{"LOOM_COHERENCE_FAULT_RUNS", T::Choice, "on", "on|off",
                                    "a fault also opens the following blocks its interval touched the last time (one mprotect, one batch of misses)"};

inline constexpr Setting kRefresh{"LOOM_COHERENCE_REFRESH", T::Choice, "on", "on|off",
                                  "an acquire fetches the new versions of copies open for plain reads in one batch and keeps them open (no trap, no protection change)"};
inline constexpr const Setting* kAll[] = {&kPolicy, &kReserve, &kNotices, &kLease, &kSyncObjects, &kExclusive, &kStats, &kFaultRuns, &kRefresh};
inline constexpr loom::settings::Table kTable{"coherence", kAll};
inline const bool kRegistered = loom::settings::register_table(kTable);  // for the start-up check

// The names these settings had before they were named after their layer (LOOM_DSM_* read as the
// substrate's): refused, naming the new one.
inline constexpr loom::settings::Renamed kFormerNames[] = {
    {"LOOM_DSM_POLICY", "LOOM_COHERENCE_POLICY"},   {"LOOM_DSM_RESERVE", "LOOM_COHERENCE_RESERVE"},
    {"LOOM_DSM_NOTICES", "LOOM_COHERENCE_NOTICES"}, {"LOOM_DSM_LEASE", "LOOM_COHERENCE_LEASE"},
    {"LOOM_DSM_SYNC_OBJECTS", "LOOM_COHERENCE_SYNC_OBJECTS"}, {"LOOM_DSM_EXCLUSIVE", "LOOM_COHERENCE_EXCLUSIVE"}};
inline const bool kFormerNamesRegistered = loom::settings::register_renamed(kFormerNames);

}  // namespace loom::coherence::settings
