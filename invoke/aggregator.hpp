#pragma once
// Aggregator (seed 000 §4.4.2): batches calls over this thread's Messengers.
//  * Trad: calls accumulate in one record per destination, serialized straight into registered
//    staging memory, and go out as one RDMA WRITE when the record reaches the size mark
//    (flush_bytes, 4 KiB by default) or on flush().
//  * Ovfl: calls go straight to the Messenger; only when it cannot make progress (chunk limit
//    reached, receiver behind) are they kept locally — serialized in registered memory as whole
//    records, sent later in place without another copy — up to overflow_limit bytes, beyond
//    which calls fail (return false).
// One Aggregator belongs to one thread.
#include <deque>
#include <span>
#include <vector>

#include "loom/invoke/calls.hpp"

namespace loom::invoke {

enum class Mode { Trad, Ovfl };

class Aggregator {
 public:
  struct Config {
    Mode mode = Mode::Trad;
    size_t flush_bytes = 4096;
    size_t overflow_limit = size_t{64} << 20;
  };
  explicit Aggregator(Config cfg);
  Aggregator() : Aggregator(Config{}) {}
  ~Aggregator();
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  template <Notify N = Notify::Transmitted, typename F>
  bool call(Thread dest, F f, Synchronizer* sync = nullptr) {
    return submit(dest, detail::call_spec<N>(f, sync), detail::transmitted_of<N>(sync));
  }
  template <Notify N = Notify::Transmitted, typename F>
  bool call_buffer(Thread dest, F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
    return submit(dest, detail::buffer_spec<N>(f, buffer, sync), detail::transmitted_of<N>(sync));
  }
  // The READ form: dest pulls orig, then runs f(buffer); with Async::Yes the calls behind it in
  // the record run while the READ is in flight. orig must stay unchanged until sync counts it.
  template <Notify N = Notify::Executed, Async A = Async::No, typename F>
  bool call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, Synchronizer* sync) {
    return submit(dest, detail::read_spec<N, F, A>(f, orig, sync), detail::transmitted_of<N>(sync));
  }
  // The result is written back into `slot` on its own once the call ran (Trad: after the
  // record went out; waiting on the slot flushes this thread's records). invoke/future.hpp has
  // call_future(agg, dest, f) with a slot of its own.
  template <Notify N = Notify::Transmitted, typename F>
  bool call_return(Thread dest, F f, ReturnSlot<std::invoke_result_t<F&>>& slot, Synchronizer* sync = nullptr) {
    return submit(dest, detail::return_spec<N>(f, slot, sync), detail::transmitted_of<N>(sync));
  }

  bool submit(Thread dest, const FrameSpec& s, Synchronizer* transmitted);
  // Trad: sends every open record. Ovfl: sends exceeding calls as far as the Messengers allow;
  // what stays is sent by this thread's later waits (Invoker::progress()) as the rings free up.
  void flush();
  // Ovfl: returns once no call is exceeding (running this thread's calls meanwhile).
  void drain();

  Mode mode() const { return cfg_.mode; }
  size_t exceeding_bytes() const { return exceeding_; }
  uint64_t exceeded_calls() const { return exceeded_; }
  // Ovfl, since construction or reset_peaks(): the most bytes kept at once for one destination
  // (global thread id), and the destinations called at all.
  size_t peak_kept_bytes(int gid) const { return peak_kept_.at(static_cast<size_t>(gid)); }
  bool called(int gid) const { return called_.at(static_cast<size_t>(gid)) != 0; }
  void reset_peaks();

 private:
  struct Queued {
    memory::RDMAMemory rec;
    size_t len;
    Synchronizer* transmitted;
  };
  bool drain_one(size_t gid);
  Messenger& messenger(Thread dest);

  Invoker& inv_;
  Config cfg_;
  std::vector<std::deque<Queued>> overflow_;  // by global thread id
  std::vector<Messenger*> touched_;           // messengers with an open record or exceeding calls
  std::vector<Messenger*> messengers_;        // this thread's, by global thread id (looked up once)
  std::vector<size_t> kept_, peak_kept_;  // by global thread id: bytes kept now, the most at once
  std::vector<uint8_t> called_;           // by global thread id
  size_t exceeding_ = 0;
  uint64_t exceeded_ = 0;
  bool noted_ = false;  // in this thread's MessengerGlobal's list of Aggregators keeping calls
  friend class MessengerGlobal;
};

}  // namespace loom::invoke
