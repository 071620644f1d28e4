#pragma once
// What objects of every policy stand on (docs/objects.md, "Context"): the Endpoint (OneSided),
// the Invoker (OwnerInvoked), the Space (Cached), the barrier that keeps running calls while it
// waits, the objects shipped operations find by id, and the cost model Auto objects choose by.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <typeinfo>
#include <vector>

#include "loom/coherence/space.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/invoke/invoker.hpp"
#include "loom/objects/cost_model.hpp"
#include "loom/objects/endpoint.hpp"

namespace loom::objects {

class Context {
 public:
  // Collective. Makes an Endpoint, and an Invoker and a Space unless the program passes its own
  // (one of each per process at a time).
  explicit Context(Runtime& rt, invoke::Invoker* invoker = nullptr, coherence::Space* space = nullptr,
                   const std::source_location& where = std::source_location::current());
  // Collective; every object made on the Context must be gone.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  static Context& current();

  Runtime& runtime() { return rt_; }
  Endpoint& endpoint() { return *ep_; }
  invoke::Invoker& invoker() { return *inv_; }
  coherence::Space& space() { return *space_; }
  int rank() const { return rt_.rank(); }
  int size() const { return rt_.size(); }

  // Every worker thread of every process (like Space::barrier): this thread's operations are
  // complete, every operation shipped to an owner before it has run (Invoker::barrier, which
  // runs the calls addressed to the waiting threads), then the Space's barrier (a release and an
  // acquire, for Cached objects).
  void barrier(const std::source_location& where = std::source_location::current());
  // One thread of every process (collective construction and teardown of objects): this thread's
  // operations are complete and the calls addressed to it run while it waits. No Space barrier.
  void process_barrier(const std::source_location& where = std::source_location::current());

  // Runs the calls waiting for this thread, if it is a worker thread (a destination): an
  // owner-invoked operation that runs here on the owner's own thread, and Auto objects now and
  // then, so that a process busy with its own operations still serves the others'.
  void attend() {
    const ThreadName& t = this_thread_name();
    if (!t.label.empty() && t.thread < inv_->threads()) inv_->poll();
  }

  // Where the fabric's atomics are not atomic with the CPU's, the Endpoint through which an
  // owner sends its own word operations (objects/slots.hpp, LocalSlots); else null.
  Endpoint* loopback() { return rt_.provider().info().cpu_atomics ? nullptr : ep_.get(); }

  // The component costs Auto objects choose by: the calibration file when it was made for this
  // provider (objects/cost_model.hpp), else measured now. Collective on its first use.
  const Components& components();

  // Objects that owner-invoked operations reach by id. attach is collective (same order
  // everywhere: the ids are compared); a shipped operation looks its object up with the type it
  // expects, and a missing or different one is an error, not a crash.
  // A shipped operation holds its object pinned while it runs; detach first makes the id
  // unknown, then waits for the pins taken before (a helper thread may be running a late call
  // on the object while its owner destroys it).
  uint32_t attach(void* object, const std::type_info& type);
  void detach(uint32_t id);

 private:
  struct Attached {
    std::atomic<void*> object{nullptr};
    std::atomic<const std::type_info*> type{nullptr};
    std::atomic<uint32_t> pins{0};
  };

 public:
  template <typename T>
  class Pinned {
   public:
    Pinned() = default;
    Pinned(T* object, std::atomic<uint32_t>* pins) : object_(object), pins_(pins) {}
    Pinned(Pinned&& o) noexcept : object_(std::exchange(o.object_, nullptr)), pins_(std::exchange(o.pins_, nullptr)) {}
    Pinned& operator=(Pinned&&) = delete;
    // Pairs with detach's acquiring load of the count: the object's last use here happens
    // before its destruction.
    ~Pinned() {
      if (pins_ != nullptr) pins_->fetch_sub(1, std::memory_order_release);
    }
    T* get() const { return object_; }

   private:
    T* object_ = nullptr;
    std::atomic<uint32_t>* pins_ = nullptr;
  };
  // The object with this id and type, pinned; an unknown id or another type is an error.
  template <typename T>
  Pinned<T> pin(uint32_t id) {
    Miss miss = Miss::None;
    Attached* a = pinned_slot(id, typeid(T), miss);
    if (a == nullptr) fail_pin(id, miss);
    return pinned<T>(*a);
  }
  // The same in this process's Context, for a shipped operation, which must not throw: empty
  // (get() is null) for an id the wire got wrong, an object of another type, one already
  // detached (a call that arrives after its object went), or no Context.
  template <typename T>
  static Pinned<T> try_pin(uint32_t id) noexcept {
    Context* c = current_or_null();
    Miss miss = Miss::None;
    Attached* a = c == nullptr ? nullptr : c->pinned_slot(id, typeid(T), miss);
    return a == nullptr ? Pinned<T>{} : pinned<T>(*a);
  }

 private:
  enum class Miss { None, Unknown, OtherType };
  static Context* current_or_null() noexcept;
  // Takes a pin on the slot (the count first, then the object's check: see detach); null, and
  // why in `miss`, for an unknown id or another type.
  Attached* pinned_slot(uint32_t id, const std::type_info& type, Miss& miss) noexcept;
  [[noreturn]] void fail_pin(uint32_t id, Miss miss) const;
  // The pin pinned_slot took, as a Pinned of the object's type (checked there).
  template <typename T>
  static Pinned<T> pinned(Attached& a) {
    return Pinned<T>(static_cast<T*>(a.object.load(std::memory_order_seq_cst)), &a.pins);
  }

  Runtime& rt_;
  std::unique_ptr<Endpoint> ep_;
  std::unique_ptr<invoke::Invoker> own_inv_;
  std::unique_ptr<coherence::Space> own_space_;
  invoke::Invoker* inv_ = nullptr;
  coherence::Space* space_ = nullptr;
  // Each counter at rank 0 takes one increment per arrival; a round ends at a multiple of `n`.
  void meet(GlobalPtr<uint64_t> counter, uint64_t n);
  GlobalPtr<uint64_t> arrivals_;  // process_barrier's counter (arrivals_ + 1), at rank 0
  std::optional<Components> components_;
  // Ids are handed out in order and never reused; a slot is written by attach and detach and
  // read by shipped operations, without a lock.
  static constexpr uint32_t kMaxObjects = 1u << 16;
  std::mutex objects_mu_;
  uint32_t next_id_ = 0;
  std::unique_ptr<Attached[]> objects_{new Attached[kMaxObjects]};
};

}  // namespace loom::objects
