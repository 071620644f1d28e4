#pragma once
// The no-setup service calls of remote invocation (seed 000 §4.4.1): a sender asks a
// destination process for chunks in the destination thread's zone ("loom.invoke.chunks"), and
// calls too large or too early for a channel travel by SEND ("loom.invoke.send"). Internal.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/service.hpp"

namespace loom::invoke {

class Invoker;

struct ChunkRequest {
  uint32_t thread;
  uint32_t count;
  uint64_t serial;
  uint64_t chunk_size;
  uint64_t control_addr;
  uint32_t control_rkey;
  uint32_t first;
};
struct ChunkReply {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};
struct SendHeader {
  uint32_t thread;
  uint32_t zero;
};

// A fixed-size message from the wire; shorter is malformed.
template <typename T>
T decode(std::span<const std::byte> b, const char* what) {
  if (b.size() < sizeof(T)) fail(what, ": malformed message of ", b.size(), " bytes");
  T v;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

// The handlers (run on the service thread); each validates everything it reads.
std::vector<std::byte> handle_chunk_request(Invoker& inv, const runtime::ServiceRequest& req);
std::vector<std::byte> handle_send_call(Invoker& inv, const runtime::ServiceRequest& req);

}  // namespace loom::invoke
