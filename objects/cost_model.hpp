#pragma once
// Seed 001's cost model (docs/objects.md, "Cost model"): the component costs of the fabric at
// hand (Table I's get, put, fetch-and-add, CAS; the RPC round trip; the owner's handler time;
// the Cached policy's region operations), and each container operation's predicted cost per
// policy and concurrency level as the sum of the components its algorithm performs in the best
// case (no collision, no contention; a bucket's line comes from the caches below the first
// level, `line`, and a fresh bucket's from its owner, `miss`).
// `loom-calibrate` measures the components and writes them to
// a file the runtime loads; Auto objects pick the cheapest policy per operation and level.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loom/objects/policy.hpp"

namespace loom::objects {

enum class Op : uint8_t { HashInsert, HashFind, QueuePush, QueuePop };
// Who writes a Cached object's blocks: one process alone (its releases keep them in place), or
// every process (each release publishes a block the others wrote too).
enum class Writers : uint8_t { One, Many };
inline constexpr Op kOps[] = {Op::HashInsert, Op::HashFind, Op::QueuePush, Op::QueuePop};
// "hash-insert", "hash-find", "queue-push", "queue-pop"
std::string_view name(Op op);

// Microseconds per operation, one at a time, from one process to another's memory.
struct Components {
  double get = 0, put = 0, fad = 0, cas = 0;  // 8-16 byte operations on a word used just before
  double atomic_read = 0;                     // an atomic read of a word (a load where mapped; else a fetch-and-add of 0)
  double miss = 0;                            // what a fresh bucket adds (a line the owner wrote last)
  double line = 0;                            // a bucket's line read again, from the caches below the first level
  double cas_contended = 0;                   // every process CASing one word (each attempt)
  double cas_persistent = 0;                  // the same, per CAS that changed the word (seed 001's "Persistent CAS")
  double fad_single = 0;                      // every process fetch-and-adding one word (seed 001's "FAD, Single Variable")
  double rpc = 0;                             // call_return round trip, empty handler
  double call = 0;                            // one aggregated call, amortized (1 / call rate)
  double post = 0;                            // one asynchronous fabric operation, amortized
  double publish_phasal = 0;                  // a phasal insert's publication: put where the word's loads are the CPU's, else cas
  // The operation itself run on local memory in the first-level cache: its own logic, which every
  // policy runs once (the owner's handler, for a shipped one); fully atomic, and phasal.
  double h_insert = 0, h_find = 0, h_push = 0, h_pop = 0;
  double h_find_phasal = 0, h_push_phasal = 0, h_pop_phasal = 0;
  double op = 0;  // a container operation's front end at the caller (routing, hashing, status)
  // Cached: a relaxed atomic on a region word; what an acquiring one adds (the release clock's
  // READ, nothing to revalidate); what a releasing one adds after one slot was written (the
  // release of one dirty block and the clock's CAS) and with nothing written; a declared write
  // of a slot in a clean block (its twin); a read of a slot in a valid copy. Both on slots in
  // many lines of many blocks, beyond the first-level cache: a slot's line comes while the
  // accessor runs (a read of one slot again costs the same), so it is in these.
  double region_atomic = 0, region_acquire = 0, region_release = 0, region_release_clean = 0;
  double region_write = 0, region_read = 0;
  // The same write and release in blocks another process wrote just before (every process writes
  // the object): the write takes a twin and opens the block, the release publishes it.
  double region_write_shared = 0, region_release_shared = 0;
  std::string provider;  // the fabric they were measured on
  int processes = 0;

  // "name value" lines; '#' starts a comment. Unknown names are an error, missing ones too.
  std::string serialize() const;
  static Components parse(const std::string& text, const std::string& source);
  static Components load(const std::string& path);
  void save(const std::string& path) const;
};

// The calibration file: LOOM_OBJECTS_CALIBRATION, else $XDG_CACHE_HOME/loom/calibration.txt,
// else $HOME/.cache/loom/calibration.txt.
std::string calibration_path();

// The predicted microseconds per operation of `op` under a fixed policy at a level, one at a
// time (batch 1) or amortized over a batch of `batch` operations.
double predict(const Components& c, Op op, Policy p, Level l, size_t batch = 1, Writers w = Writers::One);

// Level::Local (a Queue's host alone, on its own memory) costs c.op and the operation's logic
// under every policy.
//
// A checksum queue's operation (objects/queue_checksum.hpp), one at a time: OneSided, or
// OwnerInvoked (what the sequence queue's costs: the host runs either on its memory).
double predict_checksum(const Components& c, Op op, Policy p);

// A one-sided queue operation's predicted microseconds while every process works on the same
// queue at once (seed 001 §V: its model with the contended components plugged in): the claim on
// the shared counter costs what it costs contended — fad_single for a phasal claim, a read of the
// counter and cas_persistent (retried until it lands) for an atomic one — and the rest of the
// operation what predict() says (its slot is its own). Queue operations only (a hash table's
// operations spread over buckets).
double predict_contended(const Components& c, Op op, Level l);

// The cheapest of `candidates` for op at level.
Policy cheapest(const Components& c, Op op, Level l, std::span<const Policy> candidates, size_t batch = 1);

// Where an Auto object's data lives, from the model and the workload the program expects: the
// share of reads (finds, pops) among its operations, the level, and who writes it. Cached if
// its expected cost is lowest; otherwise at the owners, where OneSided and OwnerInvoked are
// chosen per operation.
struct Workload {
  double read_share = 0.5;
  Level level = Level::Atomic;
  Writers writers = Writers::Many;
};
bool prefer_cached(const Components& c, Op write, Op read, Workload w);

}  // namespace loom::objects
