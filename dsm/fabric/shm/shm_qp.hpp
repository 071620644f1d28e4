#pragma once
// The shm queue pair. Posting (the fast path of unsignaled WRITEs, the general path, one
// function per opcode) is in shm_qp_post.cpp, one translation unit, because its cost depends on
// what the compiler inlines there; set-up, connection, receives and completions in shm_qp.cpp;
// the key views in key_table.cpp.
#include <atomic>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "loom/dsm/fabric/shm/shm_cq.hpp"
#include "loom/dsm/fabric/shm/wire_engine.hpp"

namespace loom::fabric::shm {

class ShmQp : public QueuePair {
 public:
  ShmQp(ShmProvider& p, uint32_t qpn, int peer, ShmCq& scq, ShmCq& rcq, const QpCaps& caps);
  ~ShmQp() override;

  std::vector<std::byte> endpoint() const override {
    return encode_endpoint(EndpointBlob{kEndpointMagic, p_.rank(), qpn_, 0});
  }

  void connect(std::span<const std::byte> peer_endpoint) override;

  PostResult post_send(const SendWr& wr) override;
  PostResult post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) override;
  // The path of unsignaled WRITEs whose keys this QP has seen, compiled once per thread mode;
  // anything else (first use of a key, an error, a QP not ready) goes on to the general path:
  // post_general(*wr), or the WRITE's own when wr is null.
  // The local buffer comes as its three fields: an Sge in one piece went through the stack.
  template <bool kSingle>
  [[gnu::always_inline]] PostResult fast_write(uint64_t addr, uint32_t len, uint32_t lkey, uint64_t remote_addr,
                                               uint32_t rkey, bool inline_data, const SendWr* wr);
  PostResult post_general(const SendWr& wr);
  // The general path's requests between emulated nodes: queued on the wire.
  PostResult post_wired(const SendWr& wr, const uint8_t* inline_src);
  // A request carried out by another engine (the shm+verbs provider's device atomics): checked,
  // given its send-queue entry and reported (completion, error state) as post_general does its
  // own, with `execute` in place of carrying it out here.
  PostResult post_foreign(const SendWr& wr, const std::function<Status(uint32_t& byte_len)>& execute);
  [[gnu::noinline]] PostResult post_write_general(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data);
  PostResult post_recv(const RecvWr& wr) override;
  QpState state() const override { return state_.load(std::memory_order_acquire); }
  void reset() override {
    std::lock_guard<std::mutex> g(post_mu_);
    if (peer_rq_ != nullptr) state_.store(QpState::Ready);
  }
  uint32_t qp_num() const override { return qpn_; }
  int peer_rank() const override { return peer_; }
  const QpCaps& caps() const override { return caps_; }
  // An inline WRITE is copied from the caller's buffer without the local key check.
  bool inline_helps() const override { return true; }
  uint8_t* remote_pointer(uint64_t remote_addr, uint32_t rkey, uint64_t len, uint32_t access) override {
    // Between emulated nodes nothing reaches the peer's memory but requests on the wire.
    if (state() != QpState::Ready || wire_ != nullptr) return nullptr;
    // A view of its own: this is no post, so on a single-thread QP it may come from any thread
    // and must not touch the poster's remembered views.
    KeyView v;
    if (!view_key(peer_keys_, peer_, rkey, v) || !allows(v, remote_addr, len, access)) return nullptr;
    return v.mapped + (remote_addr - v.base);
  }

  // Puts this QP on an emulated wire (shm_qp_wire.cpp): from then on every request goes through
  // `engine`, timed by `spec` over this node's link and the peer node's. Before connect().
  struct WireAttachment {
    WireEngine* engine;
    const WireSpec* spec;
    LinkClock* src;
    LinkClock* dst;
  };
  void attach_wire(const WireAttachment& w);
  // Called by the engine's thread: carries the request out (false: the peer has no receive
  // posted yet; `op.at.effect` then says when to try again) and reports its completion.
  bool wire_effect(WireOp& op, uint64_t now);
  void wire_complete(const WireOp& op);

  void retire(uint64_t seq) {
    uint64_t cur = retired_.load(std::memory_order_relaxed);
    while (cur < seq && !retired_.compare_exchange_weak(cur, seq, std::memory_order_acq_rel)) {
    }
  }

 private:
  // Returns the status in a register (a returned struct of a byte and a word cost a store-
  // forwarding stall on every post).
  Status execute(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len);
  // One function per opcode (shm_qp_post.cpp).
  Status execute_write(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len);
  Status execute_read(const SendWr& wr, uint32_t& byte_len);
  Status execute_atomic(const SendWr& wr, uint32_t& byte_len);
  Status execute_send(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len);
  const uint8_t* source(const SendWr& wr, const uint8_t* inline_src, Status* why);
  template <bool kSingle>
  [[gnu::always_inline]] bool reserve(uint64_t* seq);
  bool reserve(uint64_t* seq) { return single_thread_ ? reserve<true>(seq) : reserve<false>(seq); }
  [[gnu::noinline]] bool reserve_entry(uint64_t* seq);
  // Reports a request's completion (signaled, or failed); a failure moves the QP to Error.
  [[gnu::noinline]] void complete(const SendWr& wr, uint64_t seq, Status status, uint32_t byte_len,
                                  std::unique_lock<std::mutex>& g);
  // Translates (rkey, addr, len) at the peer into a pointer in this process.
  uint8_t* resolve(uint32_t key, uint64_t addr, uint64_t len, uint32_t need, Status* why);
  // Views of registrations, cached per QP (single-thread) or per posting thread.
  struct KeyViews {
    KeyView* remote;
    KeyView* local;
  };
  template <bool kSingle>
  [[gnu::always_inline]] KeyViews views();
  KeyViews views() { return single_thread_ ? views<true>() : views<false>(); }
  // rank < 0: a local key, used at its own addresses (nothing to map).
  bool view_key(const KeyTable* t, int rank, uint32_t key, KeyView& v);
  bool current(const KeyTable* t, int rank, uint32_t key, KeyView& v);
  static bool cached(const KeyView& v, uint32_t key, uint64_t addr, uint64_t len, uint32_t need);
  // The view was taken of `key` and its generation still stands.
  static bool stands(const KeyView& v, uint32_t key);
  // The viewed registration grants `need` on [addr, addr+len).
  static bool allows(const KeyView& v, uint64_t addr, uint64_t len, uint32_t need) {
    return (v.access & need) == need && covers(v.base, v.length, addr, len);
  }
  const uint8_t* local(const Sge& sge, uint32_t need, Status* why);
  bool take_recv(RqEntry* out, Status* why);
  // The completion a request raises at the peer when it consumes the receive `e`.
  Completion receive_completion(const RqEntry& e, Opcode op, uint64_t len) const {
    Completion c;
    c.wr_id = e.wr_id;
    c.opcode = op;
    c.byte_len = static_cast<uint32_t>(len);
    c.qp_num = peer_qpn_;
    c.src_rank = p_.rank();
    return c;
  }
  void push_remote(const Completion& c, Status* sender_status);

  ShmProvider& p_;
  uint32_t qpn_;
  int peer_;
  ShmCq& scq_;
  ShmCq& rcq_;
  QpCaps caps_;
  const bool single_thread_;
  const uint64_t uid_ = next_qp_uid();
  KeyView remote_view_;  // single-thread QPs only
  KeyView local_view_;
  std::atomic<QpState> state_{QpState::Init};
  WireEngine* wire_ = nullptr;  // set before connect (an emulated wire to the peer's node)
  const WireSpec* wire_spec_ = nullptr;
  LinkClock* wire_src_ = nullptr;
  LinkClock* wire_dst_ = nullptr;
  std::unique_ptr<WireOp[]> wire_ops_;  // the ring of requests on the wire (attach_wire)
  uint64_t wire_slots_ = 0;
  uint64_t wire_posted_ = 0;  // requests handed to the engine (under the post lock, or one thread)

  std::mutex post_mu_;  // two-sided requests and (re)connection
  std::atomic<uint64_t> posted_{0};
  std::atomic<uint64_t> retired_{0};

  std::mutex recv_mu_;
  Mapping rq_map_;
  RqHeader* rq_ = nullptr;
  RqEntry* rq_entries_ = nullptr;

  Mapping peer_rq_map_;
  RqHeader* peer_rq_ = nullptr;
  RqEntry* peer_rq_entries_ = nullptr;
  Mapping peer_cq_map_;
  CqHeader* peer_cq_ = nullptr;
  CqSlot* peer_cq_slots_ = nullptr;
  uint32_t peer_qpn_ = 0;
  const KeyTable* peer_keys_ = nullptr;
  // Sizes as validated at creation / connect; the shared headers' copies are never trusted.
  uint32_t rq_cap_ = 0;
  uint32_t peer_rq_cap_ = 0;
  uint32_t peer_cq_cap_ = 0;
};

}  // namespace loom::fabric::shm
