#pragma once
// The checks that keep invocation's failures from passing in silence (docs/invocation.md,
// "Failures"): function registries compared between processes at start-up, the function a
// faulting thread was running named, and calls never run reported at teardown.
#include <cstdint>
#include <map>
#include <string>

#include "loom/dsm/runtime/runtime.hpp"
#include "loom/invoke/config.hpp"
#include "loom/invoke/registry.hpp"

namespace loom::invoke {

// Collective (bootstrap allgather): every process's registry against the others'. Where they
// differ, names each function some process lacks and which processes have it; with
// BadCalls::Fail that is an Error (on every process alike), with Report a warning.
void compare_registries(Runtime& rt, BadCalls mode);

// The call this thread is running for a remote caller: for caller_rank(), for the fault
// reporter (read in a signal handler) and for calls made inside calls. The Inbox points a
// thread-local pointer at one on its stack around every call it runs (one store and one restore
// per call: the per-call path of a trad record is a few nanoseconds long).
struct RunningCall {
  const Entry* entry = nullptr;
  int src_rank = -1;
  int index = -1;  // the destination thread
};
namespace detail {
extern thread_local const RunningCall* t_running;
}
inline const RunningCall* running_call() { return detail::t_running; }
// Points the thread at `call` for its scope; restores the one before (calls nest in broadcasts).
struct CallScope {
  RunningCall call;
  const RunningCall* saved;
  CallScope(int src_rank, const Entry* e, int index) : call{e, src_rank, index}, saved(detail::t_running) {
    detail::t_running = &call;
  }
  ~CallScope() { detail::t_running = saved; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
};
// Adds the describer that names the running call to the fault reporter (dsm/common).
void describe_faults_in_calls();

// Calls that reached a thread's inbox but never ran, by function (display name): the teardown
// reports them.
using Unrun = std::map<std::string, uint64_t>;
std::string describe_unrun(int rank, int index, const Unrun& unrun);

}  // namespace loom::invoke
