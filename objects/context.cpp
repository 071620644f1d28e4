#include "loom/objects/context.hpp"

#include <filesystem>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/objects/calibrate.hpp"

namespace loom::objects {

namespace {
std::atomic<Context*> g_current{nullptr};
}  // namespace

// g_current is claimed (CAS) when construction starts, to refuse a second Context; other threads
// use it only after the constructor's collective barrier, which orders the rest.
Context* Context::current_or_null() noexcept { return g_current.load(std::memory_order_acquire); }

Context& Context::current() {
  Context* c = current_or_null();
  if (c == nullptr) fail("objects: no Context (construct loom::objects::Context collectively first)");
  return *c;
}

Context::Context(Runtime& rt, invoke::Invoker* invoker, coherence::Space* space, const std::source_location& where)
    : rt_(rt) {
  rt.collectives().enter("objects::Context::Context", where);
  Context* expected = nullptr;
  if (!g_current.compare_exchange_strong(expected, this)) fail("objects: one Context per process at a time");
  try {
    ep_ = std::make_unique<Endpoint>(rt);
    if (invoker == nullptr) own_inv_ = std::make_unique<invoke::Invoker>(rt);
    inv_ = invoker != nullptr ? invoker : own_inv_.get();
    if (space == nullptr) own_space_ = std::make_unique<coherence::Space>(rt);
    space_ = space != nullptr ? space : own_space_.get();
    GlobalPtr<uint64_t> mine;
    if (rt.rank() == 0) {
      mine = ep_->allocate<uint64_t>(0, 2);
      mine.local()[0] = mine.local()[1] = 0;
    }
    arrivals_ = rt.bootstrap().allgather_value(mine)[0];
    rt.bootstrap().barrier();
  } catch (...) {
    g_current.store(nullptr, std::memory_order_release);
    throw;
  }
}

Context::~Context() {
  try {
    process_barrier();
    for (uint32_t id = 0; id < next_id_; ++id)
      if (objects_[id].object.load() != nullptr) log::error("objects: Context ends while object ", id, " still exists");
    if (rt_.rank() == 0) ep_->deallocate(arrivals_);
  } catch (const std::exception& e) {
    log::error("objects: Context teardown: ", e.what());
  }
  // The layers go in the reverse order of their making; each teardown is collective.
  own_space_.reset();
  own_inv_.reset();
  ep_.reset();
  g_current.store(nullptr, std::memory_order_release);
}

// A counter at rank 0 that every participant increments once per round; each waits for the
// count of its round, running its calls meanwhile.
void Context::meet(GlobalPtr<uint64_t> counter, uint64_t n) {
  ep_->flush();
  inv_->flush();
  const uint64_t ticket = ep_->fetch_add(counter, 1);
  const uint64_t target = (ticket / n + 1) * n;
  inv_->wait_until([&] { return ep_->atomic_load(counter) >= target; });
}

void Context::barrier(const std::source_location& where) {
  ep_->flush();
  inv_->barrier(where);    // every operation shipped to an owner before it has run
  space_->barrier(where);  // nothing is in flight: every thread's operations completed before it arrived
}

void Context::process_barrier(const std::source_location& where) {
  // Recorded, not compared through the bootstrap: the wait below runs calls, the bootstrap's would not.
  rt_.collectives().note("objects::Context::process_barrier", where);
  meet(arrivals_ + 1, static_cast<uint64_t>(rt_.size()));
}

const Components& Context::components() {
  if (components_) return *components_;
  const std::string path = calibration_path();
  bool usable = false;
  if (std::filesystem::exists(path)) {
    try {
      Components c = Components::load(path);
      usable = c.provider == fabric_label(rt_);
      if (usable) components_ = c;
    } catch (const std::exception& e) {
      log::warn(e.what(), "; measuring the components instead");
    }
  }
  // Every process must take the same path: measuring is collective.
  bool all = true;
  for (uint8_t u : rt_.bootstrap().allgather_value(static_cast<uint8_t>(usable))) all = all && u != 0;
  if (!all) components_ = measure_components(*this, 1000);
  return *components_;
}

uint32_t Context::attach(void* object, const std::type_info& type) {
  uint32_t id;
  {
    std::lock_guard<std::mutex> g(objects_mu_);
    if (next_id_ == kMaxObjects) fail("objects: more than ", kMaxObjects, " objects made on one Context");
    id = next_id_++;
    objects_[id].type.store(&type, std::memory_order_relaxed);
    objects_[id].object.store(object, std::memory_order_release);  // after the type: pinned_slot loads the object first
  }
  for (uint32_t other : rt_.bootstrap().allgather_value(id))
    if (other != id) fail("objects: objects were made in different orders by different processes (object ", id, " here is ", other, " elsewhere)");
  return id;
}

// Sequentially consistent on both sides (a Dekker pair with pinned_slot): either the pinner
// sees the object gone, or this sees its pin and waits for it to end.
void Context::detach(uint32_t id) {
  if (id >= kMaxObjects) return;
  Attached& a = objects_[id];
  a.object.store(nullptr, std::memory_order_seq_cst);
  wait::Backoff b(1u << 20);  // a pinned call is running now: yield to it, never sleep long
  // Acquire: pairs with the unpinning fetch_sub (release) of each call that held a pin, so its
  // uses of the object are done before the owner goes on to destroy it.
  while (a.pins.load(std::memory_order_acquire) != 0) b.pause();
}

Context::Attached* Context::pinned_slot(uint32_t id, const std::type_info& type, Miss& miss) noexcept {
  if (id >= kMaxObjects) {
    miss = Miss::Unknown;
    return nullptr;
  }
  Attached& a = objects_[id];
  a.pins.fetch_add(1, std::memory_order_seq_cst);
  const void* o = a.object.load(std::memory_order_seq_cst);
  const std::type_info* t = a.type.load(std::memory_order_relaxed);
  if (o != nullptr && *t == type) return &a;
  a.pins.fetch_sub(1, std::memory_order_release);
  miss = o == nullptr ? Miss::Unknown : Miss::OtherType;
  return nullptr;
}

void Context::fail_pin(uint32_t id, Miss miss) const {
  if (miss == Miss::OtherType) fail("objects: object ", id, " at rank ", rt_.rank(), " is not of the type the call expects");
  fail("objects: no object ", id, " at rank ", rt_.rank());
}

}  // namespace loom::objects
