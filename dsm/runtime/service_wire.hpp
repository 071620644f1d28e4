#pragma once
// The bytes of one service message (seed 000 §4.3): a 24-byte header, then the payload. Written
// by a peer, so decode() checks every field before anything uses it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace loom::runtime::service_wire {

constexpr uint32_t kMagic = 0x4c535643;  // "LSVC"
enum Kind : uint32_t { kOneWay = 0, kRequest = 1, kReply = 2, kErrorReply = 3 };

struct Header {
  uint32_t magic;
  uint32_t function;
  uint32_t length;  // payload bytes after the header
  uint32_t kind;
  uint64_t token;   // request and reply: the caller's pending call; one-way: 0
};
static_assert(sizeof(Header) == 24);

struct Message {
  Header header;
  std::span<const std::byte> payload;  // inside the decoded bytes
};

// One received message, or nullopt with *why saying what is malformed (magic, length, kind).
std::optional<Message> decode(std::span<const std::byte> bytes, std::string* why);

}  // namespace loom::runtime::service_wire
