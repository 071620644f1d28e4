#pragma once
// Channel: one offloaded Transmitter's queues and the state of its executor and completer.
//
//  * Requesters (submit) place commands in the command queue and return the command's ticket as
//    the flush tag: tickets are the queue pair's posting order, since the executor posts them in
//    ticket order.
//  * The executor (execute) posts them in batches (QueuePair::post_send_batch), holding the
//    send-queue credits alone. A post is signaled when asked, every signal interval, on the last
//    credit, and when it is the last command placed (the look-ahead) while no signal is in
//    flight; if the queue runs dry behind unsignaled posts while one is, the executor keeps
//    watching and posts a zero-length signaled WRITE once it has completed. So every ticket is
//    eventually covered by a completion.
//  * Whoever polls (complete: the completer, or a requester in Transmitter::progress or wait; one
//    at a time) pops the tag each signaled completion names, returns its credits to the executor
//    and raises the Transmitter's completed flush to the tag's ticket + 1.
#include <atomic>
#include <cstdint>
#include <thread>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/signal/offload/command_queue.hpp"
#include "loom/dsm/signal/offload/offloader.hpp"
#include "loom/dsm/signal/offload/tag_queue.hpp"

namespace loom::signal {
class Transmitter;
struct Posted;
}  // namespace loom::signal

namespace loom::signal::offload {

class Channel {
 public:
  // `way`: the mesh way of the Transmitter; worker pair way % off.workers() serves the channel.
  Channel(Transmitter& tx, Offloader& off, uint32_t depth, uint32_t interval, uint32_t way);
  ~Channel();  // waits until neither offload thread watches the queues
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Requester: checks the request, places it, hands the queue to the executor if it is idle.
  Posted submit(const fabric::SendWr& wr, bool force_signal);
  // Executor: posts up to `budget` commands; the number posted.
  int execute(int budget);
  // Executor: stops watching the queue if it is empty.
  // Not while posts wait for a signal to cover them (execute() posts a marker once none is in flight).
  bool executor_try_idle() { return uncovered_ == 0 && commands_.try_deactivate(); }
  // Any thread, one at a time (others return 0): polls the completion queue once; the number of
  // completions and refused posts handled.
  int complete();
  // Requester whose progress() found nothing: yields the core if the executor is behind (on a
  // machine with more spinning requesters than cores, their spinning is what holds it back).
  void yield_if_behind() {
    if (commands_.claimed() > posts_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  // Completer: stops watching the tags if none is in flight.
  bool completer_try_idle() { return tags_.in_flight() == 0 && tags_.try_deactivate(); }
  // Requester: returns once completed_flush() > tag, helping to poll, then sleeping until a
  // poller wakes it.
  void wait(uint64_t tag);

  uint64_t claimed() const { return commands_.claimed(); }
  uint64_t posts() const { return posts_.load(std::memory_order_relaxed); }
  uint64_t signaled_posts() const { return signaled_.load(std::memory_order_relaxed); }
  uint32_t credits() const { return credits_.load(std::memory_order_relaxed); }
  uint64_t tags_in_flight() const { return tags_.in_flight(); }

 private:
  static constexpr uint32_t kBatch = 16;  // requests handed to the provider in one call at most
  uint32_t gather(uint32_t budget);
  void post_batch(uint32_t n, bool commands);
  void post_marker();
  void count_posts(uint32_t n, bool signaled);
  void refuse(const fabric::SendWr& wr, fabric::PostResult r, bool tag_pending, bool requested);
  void finish(Tag& t);
  int settle_refused();
  void notify_waiters();

  Transmitter& tx_;
  fabric::QueuePair& qp_;
  fabric::CompletionQueue& cq_;
  Offloader& off_;
  const uint32_t interval_;
  CommandQueue commands_;
  TagQueue tags_;
  ChannelNode exec_node_;
  ChannelNode comp_node_;

  // Executor's own: posts the queue pair took since the last signaled one (their credits come
  // back with the next signal), commands posted or refused since then (their tickets wait for
  // the next signal, or a marker, to be counted done), and the batch being posted.
  uint32_t since_ = 0;
  uint32_t uncovered_ = 0;
  fabric::SendWr batch_[kBatch];
  // Credits the executor may spend (it alone takes; pollers return). Read elsewhere for statistics.
  alignas(64) std::atomic<uint32_t> credits_;
  std::atomic<uint64_t> posts_{0};
  std::atomic<uint64_t> signaled_{0};
  // One poller at a time: exchange to take (acquire), store to release; pairs between pollers, so
  // the tag queue's head and the credits returned move under it.
  alignas(64) std::atomic<bool> polling_{false};
  // Requesters asleep in wait(): the epoch a poller bumps and wakes after raising the flush.
  alignas(64) std::atomic<uint32_t> done_epoch_{0};
  std::atomic<uint32_t> waiters_{0};
};

}  // namespace loom::signal::offload
