// Synchronizers and return slots.
#include "loom/invoke/synchronizer.hpp"

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

ReturnSlotBase::ReturnSlotBase(size_t value_size) : size_(value_size) {
  mem_ = Runtime::current().heap().allocate(signal::NotifiedLayout::bytes(value_size));
  std::memset(mem_.addr, 0, signal::NotifiedLayout::bytes(value_size));
}

ReturnSlotBase::~ReturnSlotBase() { Runtime::current().heap().free(mem_.addr); }

wire::ReturnDesc ReturnSlotBase::arm() {
  ++stamp_;
  return wire::ReturnDesc{mem_.address(), mem_.rkey, static_cast<uint32_t>(size_), stamp_};
}

bool ReturnSlotBase::ready() const { return signal::test_notified(mem_.bytes(), size_, stamp_); }

void ReturnSlotBase::wait() const {
  if (stamp_ == 0) fail("ReturnSlot: waited for a result without a call_return into it");
  // A result usually comes back within a round trip: watch the flag alone for that long (as a
  // ping-pong does) before the full progress loop, which also runs this thread's calls.
  for (int i = 0; i < 256; ++i) {
    if (ready()) return;
    wait::cpu_relax();
  }
  Invoker::current().wait_until([this] { return ready(); });
}

void write_return(const Incoming& in, const void* value, size_t size) {
  if (in.ret == nullptr || in.inbox == nullptr) fail("call_return: no return descriptor");
  in.inbox->write_return(in.src_rank, *in.ret, value, size);
}

}  // namespace detail

}  // namespace loom::invoke
