#pragma once
// Collective calls are made by every process, in the same order. This process's collective
// calls are recorded here as they are made — by every layer: Runtime::barrier, the Space's
// regions, arrays, locks and barriers, Invokers and their barrier, objects — so that a misuse
// does not pass in silence. In checking mode (LOOM_CHECK) every call is compared with every
// other process's at once (a bootstrap allgather of its number, kind and call site): one called
// by some processes only, or in another order, is an Error on every process that names each
// process's call. Without it, each call is posted where the other processes of the host can see
// it (one store), and waits that last compare their call with their peers' (check_posted): a
// collective made by some processes only is named as soon as a wait for it sleeps.
#include <cstdint>
#include <functional>
#include <mutex>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

namespace loom::runtime {

class Bootstrap;

// One collective call: its number in this process, what it is and where the program made it.
struct CollectiveCall {
  uint64_t seq = 0;
  std::string kind;   // "Space::make_lock"
  std::string where;  // "prog.cpp:42" (empty: made inside Loom, e.g. by a destructor)
  std::string str() const;
};

class Collectives {
 public:
  Collectives(Bootstrap& boot, bool checking) : boot_(boot), checking_(checking) {}

  // Records this process's entry into collective `kind` (a string literal) made at `where` and
  // returns it. In checking mode, first compares it with every other process's; a mismatch
  // throws loom::Error (on every process alike).
  CollectiveCall enter(const char* kind, const std::source_location& where);
  // The same for a call the program did not make itself (a destructor, a layer's set-up).
  CollectiveCall enter(const char* kind);
  // Records the entry without comparing it through the bootstrap, whose waits run nothing: for
  // collectives that must keep running remote calls while they wait (Invoker::barrier). They
  // compare tickets in their own messages instead (check_tickets).
  CollectiveCall note(const char* kind, const std::source_location& where);

  // A call as one word for such messages: its number and a hash of its kind.
  static uint64_t ticket_of(const CollectiveCall& c);
  // Every process's ticket against this process's call `mine` (the same on every process for
  // a correct program; checked in every mode, since it costs nothing): a mismatch is an Error
  // naming each process's call, kinds told by name where this process has made such a call.
  void check_tickets(const CollectiveCall& mine, const std::vector<uint64_t>& tickets) const;
  // One peer's ticket against `mine` (collectives that exchange with one partner at a time).
  void check_ticket(const CollectiveCall& mine, int me, int peer, uint64_t ticket) const;
  // For a wait that lasts: the call `peer` has posted (Bootstrap::post_collective; every call
  // is posted as it is made, in every mode, one store) against `mine`. A peer in a call of the
  // same number but another kind — a collective made by some processes only — is an Error
  // naming both, found at once instead of a wait for ever; a peer not posted here, or not yet
  // that far, is no finding.
  void check_posted(const CollectiveCall& mine, int me, int peer) const;
  // The same against every peer, with this process's last call.
  void check_posted_all(int me) const;

  // A layer's look at each collective call as it is made (e.g. the Space warns when the process
  // barrier is called with shared-region writes unpublished); returns a handle for unobserve.
  using Observer = std::function<void(const CollectiveCall&)>;
  int observe(Observer fn);
  void unobserve(int handle);

  bool checking() const { return checking_; }
  uint64_t count() const;
  CollectiveCall last() const;

 private:
  CollectiveCall record(const char* kind, std::string where);
  std::string kind_name(uint64_t ticket, const CollectiveCall& mine) const;  // mu_ held
  void learn_kind(const char* kind);  // mu_ held
  void compare(const CollectiveCall& mine);

  Bootstrap& boot_;
  const bool checking_;
  mutable std::mutex mu_;
  uint64_t seq_ = 0;
  CollectiveCall last_;
  std::vector<std::pair<uint32_t, std::string>> kinds_;  // kind hash -> name, for messages
  std::mutex observers_mu_;
  std::vector<std::pair<int, Observer>> observers_;
  int next_observer_ = 0;
};

// "file.cpp:42" (the file's last two path components).
std::string site_of(const std::source_location& where);

}  // namespace loom::runtime
