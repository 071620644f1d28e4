// Remote invocation's receiver (invoke/inbox.cpp, invoke/dispatch.cpp) on the bytes a sender
// writes: the input is the content of a channel's two chunks (Producer header with its
// rotation marker, records with their head and tail words, frames with ids, kinds, lengths,
// notification and buffer descriptors) and also one send-based frame. A real lone-process
// Runtime and Invoker decode it with the functions below registered for every call kind. Any
// input is run or reported (Invoker::bad_calls), never undefined behaviour (ASan/UBSan).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "loom/invoke/calls.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

// Resets the one channel the harness announced, so each input starts at its first record.
struct InboxWireAccess {
  static void rewind(Inbox& ib, const std::vector<memory::RDMAMemory>& ring) {
    auto& c = *ib.channels_.at(0);
    c.ring = ring;
    c.pending.clear();
    c.cur = 0;
    c.pos = wire::kChunkHeader;
    c.g = wire::kChunkHeader;
    c.broken = false;
  }
};

}  // namespace loom::invoke

using namespace loom;
using namespace loom::invoke;

namespace {

constexpr size_t kChunk = 4096;  // the smallest LOOM_INVOKE_CHUNK_SIZE
volatile uint64_t g_sink;

void touch(std::span<const std::byte> b) {
  uint64_t x = 0;
  for (std::byte v : b) x += static_cast<uint8_t>(v);
  g_sink = x;
}
void run_any(const Incoming& in) {
  touch({reinterpret_cast<const std::byte*>(in.captures), in.capture_len});
  touch(in.buffer);
}
void run_return(const Incoming& in) {
  run_any(in);
  uint64_t v = 42;
  invoke::detail::write_return(in, &v, sizeof v);
}
void run_named(int, std::span<const std::byte> args) { touch(args); }

struct Harness {
  int argc = 1;
  char name[20] = "fuzz_invoke_channel";
  char* args[2] = {name, nullptr};
  char** argv = args;
  Runtime rt{argc, argv};
  // Bad calls are counted and survived (the default fails the process at the first one).
  static Config reporting() {
    Config c = Config::from_env();
    c.bad_calls = BadCalls::Report;
    return c;
  }
  Invoker inv{rt, reporting()};
  std::vector<memory::RDMAMemory> ring;
  memory::RDMAMemory control = rt.heap().allocate(64);

  Harness() {
    // Ids are hashes of these names (tests/fuzz/make_seeds.py writes calls to them).
    auto& reg = Registry::instance();
    reg.add("fuzz.call", run_any, wire::Kind::Call, 16);
    reg.add("fuzz.buffer", run_any, wire::Kind::Buffer, 8);
    reg.add("fuzz.written", run_any, wire::Kind::Written, 8);
    reg.add("fuzz.read", run_any, wire::Kind::Read, 8);
    reg.add("fuzz.read_async", run_any, wire::Kind::ReadAsync, 8);
    reg.add("fuzz.return", run_return, wire::Kind::Return, 8);
    register_function("fuzz.named", run_named);
    for (int i = 0; i < 2; ++i) ring.push_back(rt.heap().allocate(kChunk));
    Inbox::Announcement a;
    a.sender = uint64_t{0} << 32 | 7;
    a.control_addr = control.address();
    a.control_rkey = control.rkey;
    a.first = true;
    a.chunk_size = kChunk;
    a.chunks = ring;
    inv.inbox(0).announce(a);
    inv.inbox(0).poll();  // takes the announcement: the channel exists from here on
  }
};

Harness* g_h = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("LOOM_LOG", "error", 1);
  setenv("LOOM_INVOKE_CHUNK_SIZE", "4K", 1);
  g_h = new Harness();
  std::atexit([] { delete g_h; });  // libFuzzer ends by exit(): the job directory goes with it
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness& h = *g_h;
  Inbox& ib = h.inv.inbox(0);
  // The channel: chunk 0 then chunk 1 hold the input (zeros after it).
  for (size_t i = 0; i < h.ring.size(); ++i) {
    size_t off = i * kChunk;
    size_t n = size > off ? std::min(kChunk, size - off) : 0;
    std::memset(h.ring[i].bytes(), 0, kChunk);
    if (n > 0) std::memcpy(h.ring[i].bytes(), data + off, n);
  }
  InboxWireAccess::rewind(ib, h.ring);
  for (int rounds = 0; rounds < 64 && ib.poll() > 0; ++rounds) {
  }
  // The same bytes as one send-based frame (the service path of small calls).
  if (size >= wire::kFrameHeader && size <= 64 * 1024) {
    const auto* b = reinterpret_cast<const std::byte*>(data);
    ib.deliver_send(0, std::vector<std::byte>(b, b + size));
    ib.poll();
  }
  return 0;
}
