#pragma once
// Destinations, notification and full-channel behaviour, and the invocation settings.
#include <cstddef>
#include <cstdint>

namespace loom::invoke {

// A destination: thread `index` (0 .. threads per process - 1) of process `rank`.
struct Thread {
  int rank = -1;
  int index = 0;
  bool operator==(const Thread&) const = default;
};

// When a Synchronizer is decremented for a call.
enum class Notify {
  Transmitted,  // the call has left the sender (its record was posted to the fabric)
  Executed,     // the destination has run it (fabric FETCH_ADD on the Synchronizer's word)
};

// What a one-sided call does when the Messenger is at its chunk limit and the receiver is behind.
enum class OnFull {
  Fail,        // return false
  Retry,       // block until space frees (running this thread's own incoming calls meanwhile)
  RetryAsync,  // queue it; helper threads (or this thread's later calls) finish it, in FIFO order
};

// call_buffer's READ form (seed 000's Async parameter): No, the destination thread posts the
// READ and waits for it before it runs the next call; Yes, it posts the READ and goes on running
// the calls behind it, and runs this one when the READ has completed (at one of its later polls).
enum class Async : bool { No, Yes };

// What a receiver does with a bad call (an unknown function id, a malformed frame, a call that
// threw loom::Error), and at start-up with function registries that differ between processes.
enum class BadCalls {
  Fail,    // an error (loom::Error from the poll that met it): the process, and the job, fail
  Report,  // counted (Invoker::bad_calls), logged, skipped; the receiver keeps running
};

struct Config {
  size_t chunk_size = size_t{256} << 10;  // bytes per chunk in the receiver
  uint32_t chunks_per_request = 2;        // chunks obtained per service call (initial and growth)
  uint32_t max_chunks = 16;               // per Messenger
  uint32_t helpers = 0;                   // process-level helper threads
  uint32_t send_queue_depth = 256;
  // Where the provider can map the receiver's chunks (shm; QueuePair::remote_pointer), calls
  // are serialized straight into them and published with a release store of the record's
  // tail, instead of staged and sent with RDMA WRITE. Off: every provider takes the WRITE path.
  bool direct = true;
  // Where a peer's doorbells are out of reach (another node), ring them by a READ of the bell
  // and a wake through the service when it shows the thread asleep (invoke/bell_checks.hpp), so
  // that threads there sleep on their doorbells. Off: those threads take the timed back-off.
  bool remote_bells = true;
  BadCalls bad_calls = BadCalls::Fail;
  // Reads LOOM_INVOKE_CHUNK_SIZE, LOOM_INVOKE_CHUNKS, LOOM_INVOKE_MAX_CHUNKS, LOOM_INVOKE_HELPERS,
  // LOOM_INVOKE_DIRECT, LOOM_INVOKE_REMOTE_BELLS, LOOM_INVOKE_BAD_CALLS.
  static Config from_env();
};

}  // namespace loom::invoke
