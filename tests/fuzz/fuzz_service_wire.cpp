// Service messages (dsm/runtime/service_wire): any bytes a peer's SEND leaves in a receive
// buffer decode to an error or to a message whose payload lies inside those bytes.
#include <cstdint>
#include <cstdlib>

#include "loom/dsm/runtime/service_wire.hpp"

using namespace loom::runtime::service_wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::string why;
  auto m = decode(bytes, &why);
  if (!m) {
    if (why.empty()) std::abort();  // a refusal always says why
    return 0;
  }
  const Header& h = m->header;
  if (h.magic != kMagic || h.kind > kErrorReply) std::abort();
  if (m->payload.data() != bytes.data() + sizeof(Header) || m->payload.size() != h.length ||
      sizeof(Header) + m->payload.size() != size)
    std::abort();
  volatile uint8_t sink = 0;
  for (std::byte b : m->payload) sink = sink ^ static_cast<uint8_t>(b);  // every payload byte is readable
  return 0;
}
