// The service handlers of remote invocation, run on the service thread.
#include "loom/invoke/chunk_service.hpp"

#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

namespace {

void check_chunk_request(const Invoker& inv, const ChunkRequest& r) {
  if (r.thread >= static_cast<uint32_t>(inv.threads()))
    fail("chunk request for thread ", r.thread, "; this process has threads 0..", inv.threads() - 1);
  if (r.count == 0 || r.count > wire::kMaxInsertPerRotation) fail("chunk request for ", r.count, " chunks");
  if (r.chunk_size < 4096 || r.chunk_size % 64 != 0 || r.chunk_size > wire::kMaxRecord)
    fail("chunk request with chunk size ", r.chunk_size);
}

}  // namespace

// Allocates the chunks in the heap of the destination thread's zone, announces them to the destination thread's
// Inbox (which takes them in order at its next poll) and answers with their addresses and keys.
std::vector<std::byte> handle_chunk_request(Invoker& inv, const runtime::ServiceRequest& req) {
  auto r = decode<ChunkRequest>(req.payload, "chunk request");
  if (req.payload.size() != sizeof r) fail("chunk request: ", req.payload.size(), " bytes");
  check_chunk_request(inv, r);
  Inbox::Announcement a;
  a.sender = (static_cast<uint64_t>(req.src_rank) << 32) | (r.serial & 0xffffffffu);
  a.control_addr = r.control_addr;
  a.control_rkey = r.control_rkey;
  a.first = r.first != 0;
  a.chunk_size = r.chunk_size;
  std::vector<std::byte> reply(r.count * sizeof(ChunkReply));
  Inbox& inbox = inv.inbox(static_cast<int>(r.thread));
  for (uint32_t i = 0; i < r.count; ++i) {
    memory::RDMAMemory m = inbox.chunk_heap().allocate(r.chunk_size);
    // All of it: heap memory is reused, and a stale record of an earlier channel whose stamp
    // happened to match this channel's offsets would run again.
    std::memset(m.addr, 0, r.chunk_size);
    std::memcpy(m.bytes() + wire::kProducerOffset + 8, &a.sender, 8);
    a.chunks.push_back(m);
    ChunkReply cr{m.address(), m.rkey, 0};
    std::memcpy(reply.data() + i * sizeof cr, &cr, sizeof cr);
  }
  inbox.announce(std::move(a));
  return reply;
}

// A call that travelled by SEND: queued for the destination thread's Inbox.
std::vector<std::byte> handle_send_call(Invoker& inv, const runtime::ServiceRequest& req) {
  auto h = decode<SendHeader>(req.payload, "send-based call");
  if (h.thread >= static_cast<uint32_t>(inv.threads()))
    fail("send-based call for thread ", h.thread, "; this process has threads 0..", inv.threads() - 1);
  size_t flen = req.payload.size() - sizeof h;
  if (flen < wire::kFrameHeader || flen % 8 != 0) fail("send-based call of ", flen, " bytes is malformed");
  std::vector<std::byte> frame(req.payload.begin() + sizeof h, req.payload.end());
  inv.inbox(static_cast<int>(h.thread)).deliver_send(req.src_rank, std::move(frame));
  return {};
}

}  // namespace loom::invoke
