#include "loom/dsm/runtime/service_wire.hpp"

#include <cstring>

namespace loom::runtime::service_wire {

std::optional<Message> decode(std::span<const std::byte> bytes, std::string* why) {
  if (bytes.size() < sizeof(Header)) {
    *why = "message of " + std::to_string(bytes.size()) + " bytes is shorter than its header";
    return std::nullopt;
  }
  Message m{};
  std::memcpy(&m.header, bytes.data(), sizeof(Header));
  const Header& h = m.header;
  if (h.magic != kMagic) {
    *why = "bad magic number";
    return std::nullopt;
  }
  if (h.length != bytes.size() - sizeof(Header)) {
    *why = "length field " + std::to_string(h.length) + " disagrees with the " + std::to_string(bytes.size()) + " bytes received";
    return std::nullopt;
  }
  if (h.kind > kErrorReply) {
    *why = "unknown message kind " + std::to_string(h.kind);
    return std::nullopt;
  }
  m.payload = bytes.subspan(sizeof(Header));
  return m;
}

}  // namespace loom::runtime::service_wire
