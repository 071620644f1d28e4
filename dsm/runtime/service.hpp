#pragma once
// Service threads and send-based service calls (seed 000 §4.3). A process-level service thread
// receives SEND messages on one queue pair per peer and runs the handler the message names.
// Calls are "no-setup": any thread may call any process without prior negotiation.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"
#include "loom/dsm/runtime/peer_watch.hpp"
#include "loom/dsm/signal/transmitter.hpp"

namespace loom::runtime {

class Service;

struct ServiceRequest {
  int src_rank = -1;
  uint32_t function = 0;
  std::span<const std::byte> payload;
  uint64_t token = 0;  // non-zero when the caller waits for a reply
  Service* service = nullptr;
};

// A handler returns the reply payload (ignored for one-way calls); throwing loom::Error sends
// the error text back to a waiting caller.
using ServiceHandler = std::function<std::vector<std::byte>(const ServiceRequest&)>;

class Service {
 public:
  struct Config {
    uint32_t recv_buffers = 32;     // per peer
    uint32_t message_bytes = 4096;  // largest message, header included
  };
  // Collective over the bootstrap: creates and connects one QP per peer (self included).
  Service(Bootstrap& boot, fabric::Provider& provider, PeerWatch& peers, memory::RDMAAllocator& alloc, Config cfg);
  ~Service();

  // Function ids are FNV-1a hashes of names, identical in every process of the program.
  static uint32_t id_of(std::string_view name);
  uint32_t register_handler(std::string_view name, ServiceHandler h);
  // A message for an id no longer registered gets the unknown-function error reply. Returns
  // once no call of the handler is running (called on the service thread itself, at once), so
  // what the handler uses may be freed after it.
  void unregister_handler(uint32_t id);

  void start();
  void stop();
  // Waits until everything this process sent has completed (before a collective teardown).
  void quiesce();

  // One-way call: returns once the message is posted.
  void call(int dest, uint32_t function, std::span<const std::byte> payload);
  // The same without allocating heap memory (for a signal handler: a region fault): waits for
  // send buffers to come back rather than adding more. The calling thread must have called
  // signal::Transmitter::prepare_this_thread() before.
  void call_without_allocating(int dest, uint32_t function, std::span<const std::byte> payload);
  // Request/reply: blocks (spin, yield, sleep) until the reply arrives.
  std::vector<std::byte> call_sync(int dest, uint32_t function, std::span<const std::byte> payload);

  size_t max_payload() const;
  uint64_t bad_messages() const { return bad_.load(std::memory_order_relaxed); }
  uint64_t handled() const { return handled_.load(std::memory_order_relaxed); }
  bool on_service_thread() const;

 private:
  struct Pending;
  struct Peer {
    std::unique_ptr<fabric::CompletionQueue> send_cq;
    std::unique_ptr<fabric::QueuePair> qp;
    std::unique_ptr<signal::Transmitter> tx;
    std::mutex send_mu;
    std::unique_ptr<memory::LinearCircularAllocator> send_buffers;
  };
  // A message copied out of its receive buffer, waiting to be handled (service thread only).
  struct Received {
    int src = -1;
    std::vector<std::byte> bytes;
  };
  void send(int dest, uint32_t function, uint32_t kind, uint64_t token, std::span<const std::byte> payload,
            bool may_allocate = true);
  void loop();
  // Takes what the receive queue holds: each message is validated, copied to the backlog and
  // its buffer reposted. The service thread also runs it whenever a send of its own waits.
  int drain();
  void accept(const fabric::Completion& c);
  void handle(int src, std::span<const std::byte> msg);
  // Runs a handler; for a request (req.token != 0) sends its reply or error reply.
  void run_handler(const ServiceHandler& fn, const ServiceRequest& req);
  void repost(size_t slot);
  void reject(const std::string& why);

  Bootstrap& boot_;
  PeerWatch& watch_;
  memory::RDMAAllocator& alloc_;
  Config cfg_;
  std::unique_ptr<fabric::CompletionQueue> recv_cq_;
  std::vector<std::unique_ptr<Peer>> peers_;
  memory::RDMAMemory recv_chunk_;

  std::shared_mutex handlers_mu_;
  std::unordered_map<uint32_t, std::pair<std::string, ServiceHandler>> handlers_;
  std::mutex running_mu_;  // held by the service thread while it runs a handler

  std::mutex pending_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::atomic<uint64_t> next_token_{1};

  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<uint64_t> bad_{0};
  std::atomic<uint64_t> handled_{0};
  // Service thread only: messages received and not yet handled, in arrival order, and spare
  // buffers for them (reused, so a message costs no allocation once the job is warm).
  std::deque<Received> backlog_;
  std::vector<std::vector<std::byte>> spare_;
};

}  // namespace loom::runtime
