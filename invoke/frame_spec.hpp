#pragma once
// FrameSpec: one call as the primitives describe it, serialized straight into a record
// (docs/invocation.md, "Protocol (Messenger)").
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loom/invoke/wire.hpp"

namespace loom::invoke {

// A frame to be written: everything the primitives need to serialize one call. The
// descriptors are held by value, so a FrameSpec can be built by one function and sent by another.
struct FrameSpec {
  uint32_t fid = 0;
  wire::Kind kind = wire::Kind::Call;
  bool has_notify = false;
  wire::NotifyDesc notify{};
  size_t desc_len = 0;
  alignas(8) uint8_t desc[32] = {};  // the kind's descriptor (wire.hpp)
  const void* captures = nullptr;
  size_t capture_len = 0;
  const void* buffer = nullptr;
  size_t buffer_len = 0;
  const uint8_t* raw = nullptr;  // a whole frame already serialized (broadcast forwarding)
  size_t raw_len = 0;

  template <typename D>
  void set_desc(const D& d) {
    static_assert(sizeof(D) <= sizeof(desc) && sizeof(D) % 8 == 0);
    std::memcpy(desc, &d, sizeof d);
    desc_len = sizeof d;
  }
  void set_notify(const wire::NotifyDesc& n) {
    notify = n;
    has_notify = true;
  }

  size_t bytes() const {
    if (raw) return raw_len;
    return wire::kFrameHeader + (has_notify ? sizeof(wire::NotifyDesc) : 0) + desc_len + wire::pad8(capture_len) +
           wire::pad8(buffer_len);
  }
  // Serializes straight into the (registered) destination.
  void fill(uint8_t* p, size_t n) const {
    if (raw) {
      std::memcpy(p, raw, raw_len);
      return;
    }
    uint64_t w = wire::frame_word(fid, kind, has_notify, n);
    std::memcpy(p, &w, 8);
    p += 8;
    if (has_notify) {
      std::memcpy(p, &notify, sizeof notify);
      p += sizeof notify;
    }
    if (desc_len) {
      std::memcpy(p, desc, desc_len);
      p += desc_len;
    }
    put(p, captures, capture_len);
    if (buffer_len) put(p, buffer, buffer_len);
  }

 private:
  static void put(uint8_t*& p, const void* src, size_t len) {
    size_t padded = wire::pad8(len);
    if (padded != len) std::memset(p + padded - 8, 0, 8);
    if (len) std::memcpy(p, src, len);
    p += padded;
  }
};

}  // namespace loom::invoke
