// Synchronizers and return slots.
#include "loom/invoke/synchronizer.hpp"

#include <vector>

#include "loom/dsm/signal/notified_flag.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

Synchronizer::Synchronizer(int64_t count) {
  mem_ = Runtime::current().heap().allocate(64);
  word_ = static_cast<uint64_t*>(mem_.addr);
  std::atomic_ref<uint64_t>(*word_).store(static_cast<uint64_t>(count), std::memory_order_release);
}

Synchronizer::~Synchronizer() { Runtime::current().heap().free(mem_.addr); }

void Synchronizer::wait() {
  Invoker::current().wait_until([this] { return done(); });
}

wire::NotifyDesc Synchronizer::notify_desc() const {
  return wire::NotifyDesc{mem_.address(), mem_.rkey, static_cast<uint32_t>(Invoker::current().runtime().rank())};
}

namespace detail {

namespace {
// Slots of up to 64 bytes (results up to 56 bytes) come from a per-thread cache in front of the
// registered heap, whose lock and fit search cost a Future more than its round trip. Only the
// Runtime that gave them takes them back; a cache outliving it lets them go with the process.
constexpr size_t kCachedSlot = 64;
constexpr size_t kCacheCap = 1024;
struct SlotCache {
  Runtime* rt = nullptr;
  std::vector<memory::RDMAMemory> free;
  ~SlotCache() {
    if (rt != nullptr && Runtime::find() == rt)
      for (auto& m : free) rt->heap().free(m.addr);
  }
};
thread_local SlotCache t_slots;

memory::RDMAMemory take_slot(size_t bytes) {
  Runtime& rt = Runtime::current();
  if (bytes <= kCachedSlot) {
    if (t_slots.rt != &rt) {  // another Runtime's slots are not this one's
      t_slots.free.clear();
      t_slots.rt = &rt;
    }
    if (!t_slots.free.empty()) {
      memory::RDMAMemory m = t_slots.free.back();
      t_slots.free.pop_back();
      return m;
    }
    return rt.heap().allocate(kCachedSlot);
  }
  return rt.heap().allocate(bytes);
}

void give_slot(const memory::RDMAMemory& m, size_t bytes) {
  Runtime& rt = Runtime::current();
  if (bytes <= kCachedSlot && t_slots.rt == &rt && t_slots.free.size() < kCacheCap) {
    t_slots.free.push_back(m);
    return;
  }
  rt.heap().free(m.addr);
}
}  // namespace

ReturnSlotBase::ReturnSlotBase(size_t value_size) : size_(value_size) {
  const size_t bytes = signal::NotifiedLayout::bytes(value_size);
  mem_ = take_slot(bytes);
  std::memset(mem_.addr, 0, bytes);
}

ReturnSlotBase::~ReturnSlotBase() { give_slot(mem_, signal::NotifiedLayout::bytes(size_)); }

wire::ReturnDesc ReturnSlotBase::arm() {
  ++stamp_;
  return wire::ReturnDesc{mem_.address(), mem_.rkey, static_cast<uint32_t>(size_), stamp_};
}

bool ReturnSlotBase::ready() const { return signal::test_notified(mem_.bytes(), size_, stamp_); }

void ReturnSlotBase::wait() const {
  if (stamp_ == 0) fail("ReturnSlot: waited for a result without a call_return into it");
  // A result usually comes back within a round trip: watch the flag for that long (as a
  // ping-pong does) before the full progress loop, which also runs this thread's calls — but
  // leave for that loop at once when a call waits here: the caller's peer may be waiting in the
  // same way for this thread to run it (every rank calling and serving on its main thread), and
  // two threads each watching only their flag spun out the whole window, 256 pauses (7 us here),
  // on every call.
  Invoker& inv = Invoker::current();
  for (int i = 0; i < 256; ++i) {
    if (ready()) return;
    if ((i & 3) == 3 && inv.has_incoming()) break;
    wait::cpu_relax();
  }
  inv.wait_until([this] { return ready(); });
}

void write_return(const Incoming& in, const void* value, size_t size) {
  if (in.ret == nullptr || in.inbox == nullptr) fail("call_return: no return descriptor");
  in.inbox->write_return(in.src_rank, *in.ret, value, size);
}

}  // namespace detail

}  // namespace loom::invoke
