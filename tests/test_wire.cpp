// The words of the invocation wire (invoke/wire.hpp) and FrameSpec's serialization
// (invoke/frame_spec.hpp): what a sender writes decodes to what it meant, and the fields never
// bleed into each other.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "loom/invoke/frame_spec.hpp"
#include "loom/invoke/wire.hpp"

using namespace loom::invoke;

TEST(Wire, RecordWordCarriesOffsetStampAndLength) {
  for (uint64_t off : {uint64_t{128}, uint64_t{4096}, uint64_t{1} << 40, (uint64_t{1} << 47) - 8})
    for (size_t len : {size_t{16}, size_t{4096}, wire::kMaxRecord}) {
      uint64_t w = wire::record_word(off, len);
      EXPECT_EQ(wire::record_len(w), len);
      EXPECT_TRUE(wire::record_stamp_matches(w, off));
      EXPECT_FALSE(wire::record_stamp_matches(w, off + 8)) << "the next record's offset";
      EXPECT_FALSE(wire::record_stamp_matches(w, off + 128)) << "a later lap of the ring";
    }
}

TEST(Wire, RecordStampWrapsAfter128TiB) {
  // The stamp is the offset / 8 modulo 2^44: an offset 2^47 bytes later would match; every
  // channel would need to move 128 TiB through one chunk ring for that.
  uint64_t w = wire::record_word(1024, 64);
  EXPECT_TRUE(wire::record_stamp_matches(w, 1024 + (uint64_t{1} << 47)));
}

TEST(Wire, ZeroedMemoryIsNeverARecord) {
  // A chunk is zeroed when handed out; global offsets start at kChunkHeader, never 0.
  EXPECT_FALSE(wire::record_stamp_matches(0, wire::kChunkHeader));
  EXPECT_EQ(wire::record_len(0), 0u);
}

TEST(Wire, RotationWord) {
  uint64_t w = wire::rotation_word(123456 * 8, 3);
  EXPECT_EQ(wire::rotation_offset(w), 123456u * 8);
  EXPECT_EQ(wire::rotation_inserted(w), 3u);
  EXPECT_EQ(wire::rotation_inserted(wire::rotation_word(8, wire::kMaxInsertPerRotation)), wire::kMaxInsertPerRotation);
}

TEST(Wire, FrameWordFieldsAreIndependent) {
  for (uint32_t fid : {0u, 1u, 0x7fffffffu, 0xffffffffu})
    for (auto kind : {wire::Kind::Call, wire::Kind::Return, wire::Kind::Named})
      for (bool notify : {false, true})
        for (size_t len : {size_t{8}, size_t{4096}, wire::kMaxFrame}) {
          uint64_t w = wire::frame_word(fid, kind, notify, len);
          EXPECT_EQ(wire::frame_fid(w), fid);
          EXPECT_EQ(wire::frame_kind(w), static_cast<uint8_t>(kind));
          EXPECT_EQ(wire::frame_notify(w), notify);
          EXPECT_EQ(wire::frame_len(w), len);
        }
  EXPECT_EQ(wire::frame_kind(wire::pad_frame_word()), static_cast<uint8_t>(wire::Kind::Pad));
  EXPECT_EQ(wire::frame_len(wire::pad_frame_word()), 8u);
}

TEST(Wire, AnyWordDecodesToAKindTheDecoderChecks) {
  // A hostile frame word yields a kind <= 127; the dispatcher refuses kinds above kMaxKind.
  EXPECT_LE(wire::frame_kind(~uint64_t{0}), 127);
  EXPECT_GT(wire::frame_kind(~uint64_t{0}), wire::kMaxKind);
}

TEST(Wire, RecordsRoundToTheGranule) {
  EXPECT_EQ(wire::round_record(1), 16u);
  EXPECT_EQ(wire::round_record(16), 16u);
  EXPECT_EQ(wire::round_record(17), 32u);
  EXPECT_EQ(wire::pad8(9), 16u);
}

TEST(FrameSpec, SerializesHeaderNotifyDescriptorCapturesAndBuffer) {
  struct Cap {
    uint32_t a;
    uint16_t b;
  } cap{7, 9};  // 8 bytes with padding
  const char buf[13] = "hello, frame";
  FrameSpec f;
  f.fid = 0xabcd1234;
  f.kind = wire::Kind::Buffer;
  f.set_notify(wire::NotifyDesc{0x1000, 5, 1});
  f.set_desc(wire::BufferDesc{sizeof buf});
  f.captures = &cap;
  f.capture_len = 6;  // a capture that is not a multiple of 8
  f.buffer = buf;
  f.buffer_len = sizeof buf;
  const size_t n = f.bytes();
  EXPECT_EQ(n, wire::kFrameHeader + sizeof(wire::NotifyDesc) + sizeof(wire::BufferDesc) + 8 + 16);
  std::vector<uint8_t> out(n, 0xee);
  f.fill(out.data(), n);
  uint64_t w;
  std::memcpy(&w, out.data(), 8);
  EXPECT_EQ(wire::frame_fid(w), 0xabcd1234u);
  EXPECT_EQ(wire::frame_kind(w), static_cast<uint8_t>(wire::Kind::Buffer));
  EXPECT_TRUE(wire::frame_notify(w));
  EXPECT_EQ(wire::frame_len(w), n);
  wire::NotifyDesc nd;
  std::memcpy(&nd, out.data() + 8, sizeof nd);
  EXPECT_EQ(nd.addr, 0x1000u);
  EXPECT_EQ(nd.rank, 1u);
  wire::BufferDesc bd;
  std::memcpy(&bd, out.data() + 24, sizeof bd);
  EXPECT_EQ(bd.len, sizeof buf);
  EXPECT_EQ(std::memcmp(out.data() + 32, &cap, 6), 0);
  EXPECT_EQ(out[38], 0) << "capture padding is zeroed, not left over";
  EXPECT_EQ(out[39], 0);
  EXPECT_EQ(std::memcmp(out.data() + 40, buf, sizeof buf), 0);
  EXPECT_EQ(out[40 + 13], 0) << "buffer padding is zeroed";
}

TEST(FrameSpec, RawFramesAreCopiedWhole) {
  uint8_t raw[16];
  for (int i = 0; i < 16; ++i) raw[i] = static_cast<uint8_t>(i);
  FrameSpec f;
  f.raw = raw;
  f.raw_len = sizeof raw;
  ASSERT_EQ(f.bytes(), 16u);
  uint8_t out[16] = {};
  f.fill(out, 16);
  EXPECT_EQ(std::memcmp(out, raw, 16), 0);
}
