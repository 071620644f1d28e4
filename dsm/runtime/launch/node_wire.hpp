#pragma once
// The messages between the launchers of a job that spans nodes (loomrun on each node, and the
// rendezvous server they meet at), and between a node's leader rank and its launcher. Frames
// are [magic u32][type u8][3 zero bytes][length u32][payload], little-endian. Everything read
// comes from another process, possibly on another machine: decoding checks every length and
// count and fails with an Error naming what was wrong (fuzzed: tests/fuzz/fuzz_node_wire.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::runtime::launch {

inline constexpr uint32_t kFrameMagic = 0x4c4e4c31;  // "1LNL"
inline constexpr size_t kFrameHeader = 12;
inline constexpr uint32_t kMaxFrame = 256u << 20;  // a fence of 1024 ranks x 64 KiB fits twice over
inline constexpr uint32_t kProtocol = 1;

enum class MsgType : uint8_t {
  Hello = 1,   // node -> server: who I am
  Welcome,     // server -> node: the job as assembled
  Reject,      // server -> node: why this node cannot join
  FenceUp,     // node -> server (leader -> node): this node's contribution to a fence
  FenceDown,   // server -> node (node -> leader): every node's contributions
  Heartbeat,   // both ways, every LOOM_HEARTBEAT_MS
  Failure,     // node -> server: a rank failed here, or this node was told to stop
  Abort,       // server -> node: end the job, with this status and reason
  Done,        // node -> server: every rank here has ended, with this status
  Bye,         // server -> node: every node is done
};
const char* to_string(MsgType t);

struct Hello {
  uint32_t protocol = kProtocol;
  std::string build;    // loom::build_id(): nodes running different builds are refused
  uint32_t node = 0;    // this node's index, 0..nodes-1
  uint32_t nodes = 0;
  uint32_t procs = 0;   // ranks to start on this node
  std::string host;     // host name, for messages
};

struct Welcome {
  std::string job;                // the job's name, the same on every node
  std::vector<uint32_t> procs;    // ranks per node, in node order
  std::vector<std::string> hosts; // host name per node
};

struct Status {
  int32_t code = 0;     // exit status the job ends with
  std::string why;      // one line; empty for a clean end
};

struct Fence {
  uint64_t seq = 0;
  std::vector<std::byte> blob;
};

// One frame's type and payload.
struct Frame {
  MsgType type{};
  std::vector<std::byte> payload;
};

// Encoding: a whole frame, ready to write.
std::vector<std::byte> encode(const Hello& m);
std::vector<std::byte> encode(const Welcome& m);
std::vector<std::byte> encode(MsgType t, const Status& m);   // Reject, Failure, Abort, Done, Bye
std::vector<std::byte> encode(MsgType t, const Fence& m);    // FenceUp, FenceDown
std::vector<std::byte> encode_empty(MsgType t);              // Heartbeat

// Takes one whole frame off the front of `buf` (erasing it), or nothing while the frame is
// incomplete. A bad magic, unknown type or a length over kMaxFrame is an Error.
std::optional<Frame> take_frame(std::vector<std::byte>& buf);

// The answer to a fence: every node's part in node order, [u32 nodes] then [u64 length][bytes]
// per node. The leaders parse it (RendezvousBootstrap::take_parts).
std::vector<std::byte> join_parts(const std::vector<std::vector<std::byte>>& parts);

// Decoding a payload; an Error if it is malformed.
Hello decode_hello(std::span<const std::byte> p);
Welcome decode_welcome(std::span<const std::byte> p);
Status decode_status(std::span<const std::byte> p);
Fence decode_fence(std::span<const std::byte> p);

}  // namespace loom::runtime::launch
