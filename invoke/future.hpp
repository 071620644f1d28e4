#pragma once
// Futures: the results of call_returns still running at their destinations, as many in flight
// as a program likes (each has a registered ReturnSlot of its own), collected one by one, as
// they come (wait_any) or all together (wait_all). Waiting runs this thread's calls and sleeps
// on its doorbell when there is nothing to do (invoke/doorbell.hpp).
//
//   std::vector<Future<int>> fs;
//   for (int d = 0; d < n; ++d) fs.push_back(call_future(Thread{d, 0}, [x] { return work(x); }));
//   wait_all(std::span(fs));                  // or: size_t i = wait_any(std::span(fs));
//   int sum = 0; for (auto& f : fs) sum += f.get();
#include <memory>
#include <span>
#include <type_traits>

#include "loom/dsm/common/error.hpp"
#include "loom/invoke/aggregator.hpp"
#include "loom/invoke/calls.hpp"

namespace loom::invoke {

template <typename R>
class Future {
 public:
  Future() = default;
  explicit Future(std::unique_ptr<ReturnSlot<R>> slot) : slot_(std::move(slot)) {}
  Future(Future&&) noexcept = default;
  // A Future dropped before its result came waits for it first: the result is written into the
  // Future's slot, which must not be handed to another Future meanwhile.
  Future& operator=(Future&& other) noexcept {
    if (this != &other) {
      settle();
      slot_ = std::move(other.slot_);
    }
    return *this;
  }
  ~Future() { settle(); }

  bool valid() const { return slot_ != nullptr; }
  // The result is here (looks once: no waiting, no calls run).
  bool ready() const { return slot_ && slot_->ready(); }
  // Waits for the result (running this thread's calls meanwhile) and returns it; the Future is
  // empty afterwards.
  R get() {
    if (!slot_) fail("invoke: Future::get on an empty Future (already taken, or never made)");
    R r = slot_->get();
    slot_.reset();
    return r;
  }
  // The slot a call_return writes into (for call forms that take one).
  ReturnSlot<R>& slot() {
    if (!slot_) fail("invoke: an empty Future has no slot");
    return *slot_;
  }

 private:
  void settle() noexcept {
    if (!slot_ || slot_->ready()) return;
    try {
      slot_->wait();
    } catch (...) {  // the Invoker is gone or the caller's wait failed: the slot is given up
      (void)slot_.release();
    }
  }
  std::unique_ptr<ReturnSlot<R>> slot_;
};

// call_return into a slot of the Future's own.
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
Future<std::invoke_result_t<F&>> call_future(Thread dest, F f, Synchronizer* sync = nullptr) {
  Future<std::invoke_result_t<F&>> fut(std::make_unique<ReturnSlot<std::invoke_result_t<F&>>>());
  if (!call_return<N, P>(dest, f, fut.slot(), sync)) return {};  // OnFull::Fail: nothing sent
  return fut;
}

// The same through an Aggregator (Trad: the call goes out with its record, at the size mark or
// on flush(); waiting for the result flushes this thread's records).
template <Notify N = Notify::Transmitted, typename F>
Future<std::invoke_result_t<F&>> call_future(Aggregator& agg, Thread dest, F f, Synchronizer* sync = nullptr) {
  Future<std::invoke_result_t<F&>> fut(std::make_unique<ReturnSlot<std::invoke_result_t<F&>>>());
  if (!agg.call_return<N>(dest, f, fut.slot(), sync)) return {};
  return fut;
}

// Waits until every valid future's result is here (running this thread's calls).
template <typename R>
void wait_all(std::span<Future<R>> fs) {
  Invoker& inv = Invoker::current();
  inv.flush();
  size_t next = 0;  // futures before it are known ready
  inv.wait_until([&] {
    while (next < fs.size() && (!fs[next].valid() || fs[next].ready())) ++next;
    return next == fs.size();
  });
}

// Waits until one valid future's result is here and returns its index (the first such);
// fs.size() if none is valid.
template <typename R>
size_t wait_any(std::span<Future<R>> fs) {
  Invoker& inv = Invoker::current();
  inv.flush();
  size_t found = fs.size();
  bool any_valid = false;
  for (const auto& f : fs) any_valid = any_valid || f.valid();
  if (!any_valid) return fs.size();
  inv.wait_until([&] {
    for (size_t i = 0; i < fs.size(); ++i)
      if (fs[i].ready()) return found = i, true;
    return false;
  });
  return found;
}

}  // namespace loom::invoke
