#pragma once
// Remote invocation's settings (read by invoke::Config::from_env).
#include "loom/dsm/common/settings_check.hpp"

namespace loom::invoke::settings {

using loom::settings::Setting;
using T = loom::settings::Type;

inline constexpr Setting kChunkSize{"LOOM_INVOKE_CHUNK_SIZE", T::Size, "256K", "4K..8M",
                                    "bytes per Messenger chunk in the receiver (a multiple of 64)"};
inline constexpr Setting kChunks{"LOOM_INVOKE_CHUNKS", T::Int, "2", "1..4096", "chunks a Messenger obtains per service call"};
inline constexpr Setting kMaxChunks{"LOOM_INVOKE_MAX_CHUNKS", T::Int, "16", "2..4096", "chunks per Messenger at most"};
inline constexpr Setting kHelpers{"LOOM_INVOKE_HELPERS", T::Int, "0", "0..64", "process-level helper threads that run calls"};
inline constexpr Setting kDirect{"LOOM_INVOKE_DIRECT", T::Bool, "1", "",
                                 "serialize calls straight into chunks the provider maps; 0: stage and WRITE"};
inline constexpr Setting kRemoteBells{"LOOM_INVOKE_REMOTE_BELLS", T::Bool, "1", "",
                                      "ring threads of other nodes by a READ of their doorbell and a wake; 0: they poll with a timed back-off"};

inline constexpr Setting kBadCalls{"LOOM_INVOKE_BAD_CALLS", T::Choice, "fail", "fail|report",
                                   "a bad call, or function registries that differ: fail the process; report: log and go on"};

inline constexpr const Setting* kAll[] = {&kChunkSize, &kChunks, &kMaxChunks, &kHelpers, &kDirect, &kRemoteBells, &kBadCalls};
inline constexpr loom::settings::Table kTable{"invoke", kAll};
inline const bool kRegistered = loom::settings::register_table(kTable);  // for the start-up check

}  // namespace loom::invoke::settings
