#include "loom/dsm/fabric/fabric.hpp"

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/shm/shm_provider.hpp"
#ifdef LOOM_HAVE_VERBS
#include "loom/dsm/fabric/hybrid/hybrid_provider.hpp"
#include "loom/dsm/fabric/verbs/verbs_provider.hpp"
#endif

namespace loom::fabric {

const char* to_string(Opcode o) {
  switch (o) {
    case Opcode::Write: return "WRITE";
    case Opcode::WriteWithImm: return "WRITE_WITH_IMM";
    case Opcode::Read: return "READ";
    case Opcode::CompareSwap: return "CMP_SWAP";
    case Opcode::FetchAdd: return "FETCH_ADD";
    case Opcode::Send: return "SEND";
    case Opcode::Recv: return "RECV";
    case Opcode::RecvWriteWithImm: return "RECV_RDMA_WITH_IMM";
  }
  return "unknown-opcode";
}

const char* to_string(Status s) {
  switch (s) {
    case Status::Success: return "success";
    case Status::LocalLengthError: return "local length error";
    case Status::LocalProtectionError: return "local protection error";
    case Status::LocalOperationError: return "local QP operation error";
    case Status::RemoteAccessError: return "remote access error";
    case Status::RemoteInvalidRequest: return "remote invalid request";
    case Status::RemoteOperationalError: return "remote operational error";
    case Status::ReceiverNotReady: return "receiver not ready (retry exceeded)";
    case Status::WorkRequestFlushed: return "work request flushed";
    case Status::PeerUnreachable: return "peer unreachable";
  }
  return "unknown-status";
}

const char* to_string(PostResult r) {
  switch (r) {
    case PostResult::Ok: return "ok";
    case PostResult::QueueFull: return "queue full";
    case PostResult::InvalidArgument: return "invalid argument";
    case PostResult::NotConnected: return "not connected";
  }
  return "unknown-post-result";
}

void throw_endpoint_error(const char* provider, const char* what, int expected_rank) {
  fail(provider, ": the endpoint for the queue pair to rank ", expected_rank, " ", what);
}

std::vector<std::string> compiled_providers() {
#ifdef LOOM_HAVE_VERBS
  return {"shm", "verbs", "shm+verbs"};
#else
  return {"shm"};
#endif
}

PostResult QueuePair::post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) {
  return post_send(write_request(local, remote_addr, rkey, inline_data));
}

QueuePair::BatchResult QueuePair::post_send_batch(std::span<const SendWr> wrs) {
  BatchResult r;
  for (const SendWr& wr : wrs) {
    r.failure = post_send(wr);
    if (r.failure != PostResult::Ok) return r;
    ++r.accepted;
  }
  return r;
}

bool one_host(const ProviderContext& ctx) {
  for (int r = 0; r < ctx.size; ++r)
    if (!ctx.same_host(r, 0)) return false;
  return true;
}

std::unique_ptr<Provider> make_provider(const std::string& name, const ProviderContext& ctx) {
  if (name == "shm" || (name == "auto" && one_host(ctx))) return std::make_unique<shm::ShmProvider>(ctx);
  if (settings::raw(settings::dsm::kWire))
    fail("LOOM_WIRE emulates an interconnect between ranks of one host, inside the shm provider; this job's provider is ",
         name == "auto" ? "shm+verbs (its ranks run on several hosts)" : name, ": unset LOOM_WIRE");
  if (name == "auto") {
#ifdef LOOM_HAVE_VERBS
    return std::make_unique<hybrid::HybridProvider>(ctx);
#else
    fail("the job's ranks run on several hosts, and this build has no RDMA provider (libibverbs-dev was missing)");
#endif
  }
#ifdef LOOM_HAVE_VERBS
  if (name == "verbs") return std::make_unique<verbs::VerbsProvider>(ctx);
#endif
  std::string list;
  for (auto& p : compiled_providers()) list += (list.empty() ? "" : ", ") + p;
  fail("unknown fabric provider '", name, "' (compiled in: ", list, ")");
}

}  // namespace loom::fabric
