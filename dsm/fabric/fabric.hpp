#pragma once
// The provider contract: a verbs-shaped fabric that every provider (shm, verbs) meets with the
// same semantics. docs/provider-contract.md is the one-page statement of it; the fabric test
// suite is run against every provider.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::fabric {

[[noreturn]] void throw_endpoint_error(const char* provider, const char* what, int expected_rank);

enum class Opcode : uint8_t {
  Write = 0,
  WriteWithImm,
  Read,
  CompareSwap,
  FetchAdd,
  Send,
  // Completion-only opcodes (receive side).
  Recv,
  RecvWriteWithImm,
};

enum class Status : uint8_t {
  Success = 0,
  LocalLengthError,       // receive buffer too small, or bad local length
  LocalProtectionError,   // local buffer not covered by the lkey
  LocalOperationError,    // the local QP rejected the request (rxe's report for bad local keys and short receives)
  RemoteAccessError,      // unknown / revoked rkey, out of bounds, or access not granted
  RemoteInvalidRequest,   // misaligned atomic, message longer than the receive buffer
  RemoteOperationalError, // the target's completion queue overran
  ReceiverNotReady,       // no receive posted at the target before the retry limit
  WorkRequestFlushed,     // posted while the queue pair was in the error state
  PeerUnreachable,        // the target process is gone
};

const char* to_string(Opcode o);
const char* to_string(Status s);

// Result of posting (not of executing): like the errno of ibv_post_send.
enum class PostResult : uint8_t {
  Ok = 0,
  QueueFull,        // send/receive queue at its depth (ENOMEM on a NIC)
  InvalidArgument,  // malformed request: bad opcode, atomic length != 8, inline too long
  NotConnected,
};
const char* to_string(PostResult r);

enum Access : uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kRemoteAtomic = 1u << 3,
  kAllAccess = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic,
};

// Memory that a provider can register: for shm it lives in a named shared-memory segment
// that peers map on first use; for verbs it is ordinary (huge-page) memory.
struct Chunk {
  void* addr = nullptr;
  size_t size = 0;
  int numa_node = -1;
  bool huge_pages = false;
  uint64_t provider_handle = 0;
};

// A registration: `size` bytes from `addr` under its keys (the registered memory the allocators
// hand out, memory::RDMAMemory, names its bytes the same way).
struct MemoryRegion {
  void* addr = nullptr;
  size_t size = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct SendWr {
  uint64_t wr_id = 0;
  Opcode opcode = Opcode::Write;
  bool signaled = false;
  bool inline_data = false;  // data is copied at post time; lkey is not checked
  Sge local;                 // source (WRITE, SEND) or destination (READ, atomics: 8 bytes)
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;          // WRITE_WITH_IMM
  uint64_t compare_add = 0;  // CMP_SWAP: compare; FETCH_ADD: addend
  uint64_t swap = 0;         // CMP_SWAP: swap
};

// The request post_write stands for: an unsignaled WRITE, wr_id 0.
inline SendWr write_request(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) {
  SendWr wr;
  wr.opcode = Opcode::Write;
  wr.local = local;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  wr.inline_data = inline_data;
  return wr;
}
// A READ of `local.length` bytes at remote_addr into `local`, wr_id 0.
inline SendWr read_request(Sge local, uint64_t remote_addr, uint32_t rkey) {
  SendWr wr;
  wr.opcode = Opcode::Read;
  wr.local = local;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return wr;
}

struct RecvWr {
  uint64_t wr_id = 0;
  Sge local;
};

struct Completion {
  uint64_t wr_id = 0;
  Status status = Status::Success;
  Opcode opcode = Opcode::Write;
  bool with_imm = false;
  uint32_t byte_len = 0;
  uint32_t imm = 0;
  uint32_t qp_num = 0;
  int32_t src_rank = -1;  // receive completions: the sender's rank
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Non-blocking. Returns the number of completions written to `out`.
  virtual int poll(std::span<Completion> out) = 0;
  // Blocks until the queue may be non-empty, `timeout` passes, or interrupt() is called.
  // The caller polls afterwards. Waiters spin, yield, then sleep; producers wake sleepers.
  virtual void wait(std::chrono::nanoseconds timeout) = 0;
  virtual void interrupt() = 0;
  virtual uint32_t capacity() const = 0;
  // True once the queue overran (a fatal error on a NIC as here).
  virtual bool overrun() const = 0;
};

struct QpCaps {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_inline = 64;
  // A thread domain (verbs' ibv_td, UCX's UCS_THREAD_MODE_SINGLE): the caller promises that
  // post_send and post_recv on this QP never run concurrently, and the provider drops the
  // synchronization it would otherwise need between posting threads. Polling the QP's
  // completion queues may still happen on any thread.
  bool single_thread = false;
};

enum class QpState : uint8_t { Init, Ready, Error };

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  // Provider-specific bytes that the peer passes to connect().
  virtual std::vector<std::byte> endpoint() const = 0;
  virtual void connect(std::span<const std::byte> peer_endpoint) = 0;
  // Thread-safe, as ibv_post_send is (unless the QP was created single_thread).
  [[nodiscard]] virtual PostResult post_send(const SendWr& wr) = 0;
  [[nodiscard]] virtual PostResult post_recv(const RecvWr& wr) = 0;
  // An unsignaled one-sided WRITE without a work request to build: the same as post_send of
  // SendWr{opcode Write, local, remote_addr, rkey, inline_data, unsignaled, wr_id 0}, with the
  // arguments in registers (what rdma-core's ibv_wr_rdma_write does for ibv_qp_ex). The default,
  // through post_send, is defined out of line: inline, the compiler guessed it at every call
  // (a test of the vtable slot before the call, and the request built in the caller's loop).
  [[nodiscard]] virtual PostResult post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data);
  // Posts `wrs` in order as one call: the first `accepted` were posted; when that is fewer than
  // all, `failure` is post_send's result for the next one (nothing after it was posted). The
  // default posts them one at a time; the verbs provider hands the device one linked list (one
  // lock, one doorbell), which is what an executor thread gains by batching (docs/offloading.md).
  struct BatchResult {
    size_t accepted = 0;
    PostResult failure = PostResult::Ok;
  };
  [[nodiscard]] virtual BatchResult post_send_batch(std::span<const SendWr> wrs);
  virtual QpState state() const = 0;
  // Error -> Ready with the same peer, once the caller has drained the send completions.
  virtual void reset() = 0;
  virtual uint32_t qp_num() const = 0;
  virtual int peer_rank() const = 0;
  virtual const QpCaps& caps() const = 0;
  // Whether inline data saves work (a NIC skips the DMA read of the source); false for shm,
  // where it is one more copy.
  virtual bool inline_helps() const { return false; }
  // Optional (the counterpart of UCX's ucp_rkey_ptr): a pointer in this process through which
  // [remote_addr, remote_addr+len) of the peer's memory registered under rkey can be accessed
  // directly, after the same key, bounds and access checks a one-sided request makes; nullptr
  // where the transport cannot map peer memory (verbs) or the checks fail. Stores through it are
  // plain CPU stores: the caller orders them (a release store of a trailing flag) itself. Valid
  // while the registration lives.
  virtual uint8_t* remote_pointer(uint64_t remote_addr, uint32_t rkey, uint64_t len, uint32_t access) {
    (void)remote_addr, (void)rkey, (void)len, (void)access;
    return nullptr;
  }
};

struct ProviderContext {
  int rank = 0;
  int size = 1;
  std::string job_id;
  std::string job_dir;             // per-job directory for named segments (shm)
  std::vector<int> pids;           // every rank's process id ...
  std::vector<std::string> hosts;  // ... and host name, for liveness checks on one host
  std::vector<int> host_of;        // per rank: its host (equal: the two can map each other's memory)
  std::vector<std::string> job_ids;   // per rank: its launcher's job, and the job directory on its
  std::vector<std::string> job_dirs;  // host (ranks of one host may have different ones: two launchers)
  // Whether ranks a and b are on one host (everyone is, when the layout is not known).
  bool same_host(int a, int b) const {
    return host_of.empty() || host_of[static_cast<size_t>(a)] == host_of[static_cast<size_t>(b)];
  }
};

struct ProviderInfo {
  std::string name;
  bool huge_pages = false;
  uint32_t max_qp_depth = 0;
  uint32_t max_inline = 0;
  uint32_t max_message = 0;
  // Whether the fabric's atomics on a word are atomic with the target CPU's own atomics on it
  // (shm: they are the CPU's; verbs: only with IBV_ATOMIC_GLOB). Where not, a process that
  // mixes its own atomics with peers' fabric atomics on one word must send its own through the
  // fabric too (objects/slots.hpp, LocalSlots).
  bool cpu_atomics = false;
  std::string description;
};

// Requests a provider has handed to an RDMA device for one peer (verbs: counted at post), the
// atomics apart; shared-memory requests are not counted (a count on that path would cost).
struct PeerTraffic {
  uint64_t device_posts = 0;
  uint64_t device_atomics = 0;
};

// A protection domain on one device, plus its factories.
class Provider {
 public:
  virtual ~Provider() = default;
  virtual const ProviderInfo& info() const = 0;
  virtual Chunk map_chunk(size_t size, int numa_node) = 0;
  virtual void unmap_chunk(const Chunk& c) = 0;
  // Gives [offset, offset+len) of a mapped chunk its memory now, before it is handed out, so
  // that lack of memory is an Error here and never a fault (SIGBUS) at the first touch.
  virtual void commit(const Chunk& c, size_t offset, size_t len) = 0;
  // Registers [addr, addr+len) which must lie within one mapped chunk.
  virtual MemoryRegion register_memory(void* addr, size_t len, uint32_t access) = 0;
  virtual void deregister(const MemoryRegion& mr) = 0;
  virtual std::unique_ptr<CompletionQueue> create_cq(uint32_t depth) = 0;
  virtual std::unique_ptr<QueuePair> create_qp(int peer_rank, CompletionQueue& send_cq,
                                               CompletionQueue& recv_cq, const QpCaps& caps) = 0;
  // True while the peer process is alive (as far as this provider can tell).
  virtual bool peer_alive(int rank) const = 0;
  // Device traffic to a peer so far (zero for providers without a device).
  virtual PeerTraffic traffic(int rank) const {
    (void)rank;
    return {};
  }
  // The transport to a peer: "shm", or the device's ("verbs").
  virtual std::string transport(int rank) const {
    (void)rank;
    return info().name;
  }
};

// The contract's post-time checks, the same for every provider: unknown opcode, atomics that
// are not 8 bytes on an 8-byte aligned word, inline READs or inline data over max_inline.
// Inline: it is on every post's path.
inline PostResult check_send(const SendWr& wr, const QpCaps& caps) {
  switch (wr.opcode) {
    case Opcode::Write:
    case Opcode::WriteWithImm:
    case Opcode::Send:
      break;
    case Opcode::Read:
      if (wr.inline_data) return PostResult::InvalidArgument;
      break;
    case Opcode::CompareSwap:
    case Opcode::FetchAdd:
      if (wr.local.length != 8 || wr.inline_data || wr.remote_addr % 8 != 0) return PostResult::InvalidArgument;
      break;
    default:
      return PostResult::InvalidArgument;
  }
  if (wr.inline_data && wr.local.length > caps.max_inline) return PostResult::InvalidArgument;
  return PostResult::Ok;
}

// Endpoint blobs are fixed-size trivially copyable structs with a magic number and the rank of
// the process that made them; decoding checks both, since the bytes come from another process.
template <typename Blob>
std::vector<std::byte> encode_endpoint(const Blob& b) {
  static_assert(std::is_trivially_copyable_v<Blob>);
  std::vector<std::byte> out(sizeof b);
  std::memcpy(out.data(), &b, sizeof b);
  return out;
}
template <typename Blob>
Blob decode_endpoint(std::span<const std::byte> bytes, uint32_t magic, int expected_rank, const char* provider) {
  if (bytes.size() != sizeof(Blob)) throw_endpoint_error(provider, "is malformed (wrong size)", expected_rank);
  Blob b;
  std::memcpy(&b, bytes.data(), sizeof b);
  if (b.magic != magic) throw_endpoint_error(provider, "has a bad magic number (another provider's?)", expected_rank);
  if (b.rank != expected_rank) throw_endpoint_error(provider, "names another rank", expected_rank);
  return b;
}

// Providers compiled into this build, in order of preference.
std::vector<std::string> compiled_providers();
// True if every rank of the context runs on one host.
bool one_host(const ProviderContext& ctx);
// Creates the named provider: "shm", "verbs", or "auto" (shm when every rank is on this host,
// else shm+verbs: shared memory within a host, the device between hosts); a clear error if it
// is unknown or unusable here.
std::unique_ptr<Provider> make_provider(const std::string& name, const ProviderContext& ctx);

// Work a thread does while a post waits for the peer: inside post_send for a receive buffer
// (the shm provider's RNR wait runs on the posting thread) and in the Transmitter for send-queue
// credits (on a NIC, sends complete only once the peer has a receive buffer). The service thread
// installs one that frees its own receive buffers, so two processes whose senders wait for each
// other's buffers cannot deadlock. Per thread; fn == nullptr: none.
struct PostWaitHook {
  void (*fn)(void* arg) = nullptr;
  void* arg = nullptr;
};
inline thread_local PostWaitHook t_post_wait_hook;

}  // namespace loom::fabric
