#pragma once
// A container's memory under its placement (docs/objects.md, "Policies"): parts of slots with a
// few counter words each, either at their owners (registered memory, reached by OneSided and
// OwnerInvoked operations alike) or in a shared region of their own (Cached). It hands out the
// slot store each policy works through (objects/slots.hpp), and the return slots an
// owner-invoked operation's result comes back in.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <typeinfo>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/invoke/calls.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/slots.hpp"

namespace loom::objects {

inline constexpr size_t kCounters = 8;  // counter words ahead of each part's slots (one cache line)

template <typename P>
class SlotArray {
 public:
  using Init = uint64_t (*)(size_t i);  // slot i's control word when made

  // Collective: every process passes the same owners, sizes and placement (checked).
  SlotArray(Context& ctx, std::vector<int> owners, size_t per, bool in_region, Init init)
      : ctx_(ctx), owners_(std::move(owners)), per_(per), region_(in_region) {
    check_shape();
    if (region_) make_in_region(init);
    else make_at_owners(init);
  }
  // Collective: the memory goes once nobody uses it.
  ~SlotArray() {
    try {
      ctx_.process_barrier();
      for (auto& pt : owned_)
        if (!pt->scratch.null()) ctx_.endpoint().deallocate(pt->scratch);
      if (region_) {
        ctx_.space().destroy_region(*r_);
      } else {
        for (GlobalPtr<std::byte> p : mine_) ctx_.endpoint().deallocate(p);
        ctx_.runtime().bootstrap().barrier();
      }
    } catch (const std::exception& e) {
      log::error("objects: teardown of a container: ", e.what());
    }
  }
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;

  Context& context() { return ctx_; }
  size_t parts() const { return owners_.size(); }
  size_t per() const { return per_; }
  int owner(size_t part) const { return owners_[part]; }
  bool in_region() const { return region_; }

  RemoteSlots<P> remote(size_t part) {
    const GlobalPtr<std::byte> b = bases_[part];
    return RemoteSlots<P>(ctx_.endpoint(), (b + kCountersBytes).template as<Slot<P>>(), b.template as<uint64_t>());
  }
  LocalSlots<P> local(size_t part) {
    const GlobalPtr<std::byte> b = bases_[part];
    if (b.rank() != ctx_.rank()) fail("objects: part ", part, " is at rank ", b.rank(), ", not here");
    return LocalSlots<P>(reinterpret_cast<Slot<P>*>(b.local() + kCountersBytes), b.template as<uint64_t>().local(), ctx_.loopback());
  }
  RegionSlots<P> region(size_t part) {
    return RegionSlots<P>(ctx_.space(), slots_ + part * per_, words_ + part * per_, counters_ + part * kCounters);
  }

  // Ships f to `rank`'s first worker thread and waits for its result (call_return), running
  // this thread's own calls meanwhile.
  template <typename R, typename F>
  R call(int rank, F f) {
    invoke::ReturnSlot<R>& slot = return_slot<R>();
    invoke::call_return(invoke::Thread{rank, 0}, f, slot);
    return slot.get();
  }

  // This thread's return slot for results of type R.
  template <typename R>
  invoke::ReturnSlot<R>& return_slot() {
    PerThread& pt = mine();
    for (auto& [type, slot] : pt.slots)
      if (*type == typeid(R)) return *static_cast<invoke::ReturnSlot<R>*>(slot.get());
    pt.slots.emplace_back(&typeid(R), std::make_shared<invoke::ReturnSlot<R>>());
    return *static_cast<invoke::ReturnSlot<R>*>(pt.slots.back().second.get());
  }
  // This thread's Synchronizer for a batch of `calls` executed-notified calls (reused: its count
  // is back at zero once the last batch was waited for).
  invoke::Synchronizer& synchronizer(int64_t calls) {
    PerThread& pt = mine();
    if (!pt.sync) pt.sync = std::make_unique<invoke::Synchronizer>(0);
    if (pt.sync->count() != 0) fail("objects: a batch's Synchronizer still counts ", pt.sync->count(), " calls");
    pt.sync->add(calls);
    return *pt.sync;
  }
  // This thread's registered scratch for n elements of T, where owners put a batch's results.
  template <typename T>
  GlobalPtr<T> scratch(size_t n) {
    PerThread& pt = mine();
    const size_t bytes = std::max<size_t>(n * sizeof(T), 64);
    if (pt.scratch_bytes < bytes) {
      if (!pt.scratch.null()) ctx_.endpoint().deallocate(pt.scratch);
      pt.scratch = ctx_.endpoint().allocate<std::byte>(ctx_.rank(), bytes);
      pt.scratch_bytes = bytes;
    }
    return pt.scratch.template as<T>();
  }

 private:
  static constexpr size_t kCountersBytes = kCounters * 8;
  static constexpr size_t kThreads = 256;
  struct PerThread {  // one thread's, used by it alone
    std::vector<std::pair<const std::type_info*, std::shared_ptr<void>>> slots;
    std::unique_ptr<invoke::Synchronizer> sync;
    GlobalPtr<std::byte> scratch;
    size_t scratch_bytes = 0;
  };
  // The runtime's threads, by index.
  PerThread& mine() {
    const int t = this_thread_name().thread;
    if (this_thread_name().label.empty() || t < 0 || static_cast<size_t>(t) >= kThreads)
      fail("objects: owner-invoked operations run on threads the runtime started (Runtime::spawn)");
    std::atomic<PerThread*>& a = per_thread_[static_cast<size_t>(t)];
    PerThread* pt = a.load(std::memory_order_acquire);
    if (pt != nullptr) return *pt;
    std::lock_guard<std::mutex> g(per_thread_mu_);
    pt = a.load(std::memory_order_relaxed);
    if (pt == nullptr) {
      owned_.push_back(std::make_unique<PerThread>());
      pt = owned_.back().get();
      a.store(pt, std::memory_order_release);
    }
    return *pt;
  }
  struct Shape {
    uint64_t parts, per, region, owner_sum;
  };

  void check_shape() {
    if (per_ == 0) fail("objects: a container part of 0 slots");
    uint64_t sum = 0;
    for (int o : owners_) {
      if (o < 0 || o >= ctx_.size()) fail("objects: owner rank ", o, " is not in 0..", ctx_.size() - 1);
      sum = sum * 31 + static_cast<uint64_t>(o);
    }
    const Shape mine{owners_.size(), per_, region_ ? 1u : 0u, sum};
    for (const Shape& s : ctx_.runtime().bootstrap().allgather_value(mine))
      if (s.parts != mine.parts || s.per != mine.per || s.region != mine.region || s.owner_sum != mine.owner_sum)
        fail("objects: a container made with different owners, sizes or policies by different processes");
  }

  // Each owner allocates its parts in its registered memory and sets their words.
  void make_at_owners(Init init) {
    Endpoint& ep = ctx_.endpoint();
    const size_t bytes = kCountersBytes + per_ * sizeof(Slot<P>);
    std::vector<GlobalPtr<std::byte>> mine(owners_.size());
    for (size_t part = 0; part < owners_.size(); ++part) {
      if (owners_[part] != ctx_.rank()) continue;
      GlobalPtr<std::byte> b = ep.allocate<std::byte>(ctx_.rank(), bytes);
      std::memset(b.local(), 0, bytes);
      Slot<P>* s = reinterpret_cast<Slot<P>*>(b.local() + kCountersBytes);
      for (size_t i = 0; i < per_; ++i) s[i].word = init(i);
      mine[part] = b;
      mine_.push_back(b);
    }
    bases_.assign(owners_.size(), GlobalPtr<std::byte>());
    const auto all = ctx_.runtime().bootstrap().allgather(std::as_bytes(std::span(mine)));
    for (size_t part = 0; part < owners_.size(); ++part) {
      std::memcpy(&bases_[part], all[static_cast<size_t>(owners_[part])].data() + part * sizeof(GlobalPtr<std::byte>), sizeof(GlobalPtr<std::byte>));
    }
    ctx_.runtime().bootstrap().barrier();
  }

  // A region of its own: the slots (with their mirror words) in plain blocks, the control words
  // and counters in atomic blocks; rank 0 sets the control words that do not start at zero (a
  // mirror is read only after a writer set it with its payload).
  void make_in_region(Init init) {
    coherence::Space& sp = ctx_.space();
    const size_t block = 4096, n = parts() * per_;
    auto round = [&](size_t b) { return (b + block - 1) / block * block; };
    region::RegionOptions o;
    o.size = round(n * sizeof(Slot<P>)) + round(n * 8) + round(parts() * kCountersBytes) + 4 * block;
    o.block_size = block;
    o.local_bytes = 0;
    r_ = &sp.create_region(o);
    slots_ = static_cast<Slot<P>*>(r_->allocate(n * sizeof(Slot<P>), block));
    words_ = sp.new_atomic_words(*r_, n);
    counters_ = sp.new_atomic_words(*r_, parts() * kCounters);
    if (ctx_.rank() == 0)
      for (size_t k = 0; k < n; ++k)
        if (const uint64_t w = init(k % per_); w != 0) sp.atomic_ref(&words_[k]).compare_swap(0, w, Order::Relaxed);
    ctx_.process_barrier();
  }

  Context& ctx_;
  std::vector<int> owners_;
  size_t per_;
  bool region_;
  std::vector<GlobalPtr<std::byte>> bases_;  // at owners: each part's [counters | slots]
  std::vector<GlobalPtr<std::byte>> mine_;
  region::Region* r_ = nullptr;
  Slot<P>* slots_ = nullptr;
  uint64_t* words_ = nullptr;
  uint64_t* counters_ = nullptr;
  std::array<std::atomic<PerThread*>, kThreads> per_thread_{};
  std::mutex per_thread_mu_;
  std::vector<std::unique_ptr<PerThread>> owned_;
};

}  // namespace loom::objects
