// The launchers' frames and messages (dsm/runtime/launch/node_wire.hpp): bytes from another
// node's launcher over TCP, or from a node's leader rank. take_frame hands out whole frames only;
// each decoder returns a message or an Error; a decoded message encodes back to the same frame.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/launch/node_wire.hpp"

using namespace loom::runtime::launch;

namespace {
void same(const std::vector<std::byte>& frame, const Frame& f) {
  std::vector<std::byte> copy = frame;
  auto back = take_frame(copy);
  if (!back || back->type != f.type || back->payload != f.payload || !copy.empty()) std::abort();
}

void decode(const Frame& f) {
  try {
    switch (f.type) {
      case MsgType::Hello: same(encode(decode_hello(f.payload)), f); break;
      case MsgType::Welcome: same(encode(decode_welcome(f.payload)), f); break;
      case MsgType::FenceUp:
      case MsgType::FenceDown: same(encode(f.type, decode_fence(f.payload)), f); break;
      case MsgType::Heartbeat: break;
      default: same(encode(f.type, decode_status(f.payload)), f); break;
    }
  } catch (const loom::Error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> buf(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  try {
    while (auto f = take_frame(buf)) {
      if (f->payload.size() > kMaxFrame) std::abort();
      decode(*f);
    }
  } catch (const loom::Error&) {
  }
  return 0;
}
