// The launchers' frames and messages: encoding, and decoding that trusts nothing it reads.
#include "loom/dsm/runtime/launch/node_wire.hpp"

#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime::launch {

namespace {

constexpr uint32_t kMaxString = 4096;   // host names, build ids, reasons
constexpr uint32_t kMaxNodes = 4096;

class Writer {
 public:
  explicit Writer(MsgType t) {
    u32(kFrameMagic);
    const uint8_t type[4] = {static_cast<uint8_t>(t), 0, 0, 0};
    raw(type, 4);
    u32(0);  // the length, set by done()
  }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void bytes(std::span<const std::byte> b) {
    u64(b.size());
    raw(b.data(), b.size());
  }
  std::vector<std::byte> done() {
    const size_t len = out_.size() - kFrameHeader;
    if (len > kMaxFrame) fail("launcher: a message of ", len, " bytes exceeds the limit of ", kMaxFrame);
    const auto l = static_cast<uint32_t>(len);
    std::memcpy(out_.data() + 8, &l, 4);
    return std::move(out_);
  }

 private:
  // resize and copy: GCC 12 warns falsely (-Wstringop-overflow) on vector::insert of a few bytes.
  void raw(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> p, const char* what) : p_(p), what_(what) {}
  uint32_t u32() {
    uint32_t v;
    raw(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v;
    raw(&v, 8);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    if (n > kMaxString) bad("a string of ", n, " bytes");
    std::string s(n, '\0');
    raw(s.data(), n);
    return s;
  }
  std::vector<std::byte> bytes() {
    const uint64_t n = u64();
    if (n > p_.size() - at_) bad("a blob of ", n, " bytes in ", p_.size() - at_, " left");
    std::vector<std::byte> b(p_.begin() + static_cast<ptrdiff_t>(at_), p_.begin() + static_cast<ptrdiff_t>(at_ + n));
    at_ += n;
    return b;
  }
  uint32_t count(uint32_t limit) {
    const uint32_t n = u32();
    if (n > limit) bad("a count of ", n, " (limit ", limit, ")");
    return n;
  }
  void end() {
    if (at_ != p_.size()) bad(p_.size() - at_, " bytes after its end");
  }
  template <typename... A>
  [[noreturn]] void bad(A&&... a) {
    fail("launcher: malformed ", what_, " message: ", std::forward<A>(a)...);
  }

 private:
  void raw(void* out, size_t n) {
    if (n > p_.size() - at_) bad("it ends early");
    std::memcpy(out, p_.data() + at_, n);
    at_ += n;
  }
  std::span<const std::byte> p_;
  const char* what_;
  size_t at_ = 0;
};

}  // namespace

const char* to_string(MsgType t) {
  switch (t) {
    case MsgType::Hello: return "hello";
    case MsgType::Welcome: return "welcome";
    case MsgType::Reject: return "reject";
    case MsgType::FenceUp: return "fence-up";
    case MsgType::FenceDown: return "fence-down";
    case MsgType::Heartbeat: return "heartbeat";
    case MsgType::Failure: return "failure";
    case MsgType::Abort: return "abort";
    case MsgType::Done: return "done";
    case MsgType::Bye: return "bye";
  }
  return "unknown";
}

std::vector<std::byte> encode(const Hello& m) {
  Writer w(MsgType::Hello);
  w.u32(m.protocol);
  w.str(m.build);
  w.u32(m.node);
  w.u32(m.nodes);
  w.u32(m.procs);
  w.str(m.host);
  return w.done();
}

std::vector<std::byte> encode(const Welcome& m) {
  Writer w(MsgType::Welcome);
  w.str(m.job);
  w.u32(static_cast<uint32_t>(m.procs.size()));
  for (uint32_t p : m.procs) w.u32(p);
  w.u32(static_cast<uint32_t>(m.hosts.size()));
  for (const auto& h : m.hosts) w.str(h);
  return w.done();
}

std::vector<std::byte> encode(MsgType t, const Status& m) {
  Writer w(t);
  w.u32(static_cast<uint32_t>(m.code));
  w.str(m.why.size() > kMaxString ? m.why.substr(0, kMaxString) : m.why);
  return w.done();
}

std::vector<std::byte> encode(MsgType t, const Fence& m) {
  Writer w(t);
  w.u64(m.seq);
  w.bytes(m.blob);
  return w.done();
}

std::vector<std::byte> join_parts(const std::vector<std::vector<std::byte>>& parts) {
  size_t total = 4;
  for (const auto& p : parts) total += 8 + p.size();
  std::vector<std::byte> out(total);
  const auto n = static_cast<uint32_t>(parts.size());
  std::memcpy(out.data(), &n, 4);
  size_t at = 4;
  for (const auto& p : parts) {
    const uint64_t len = p.size();
    std::memcpy(out.data() + at, &len, 8);
    if (len != 0) std::memcpy(out.data() + at + 8, p.data(), len);
    at += 8 + len;
  }
  return out;
}

std::vector<std::byte> encode_empty(MsgType t) { return Writer(t).done(); }

std::optional<Frame> take_frame(std::vector<std::byte>& buf) {
  if (buf.size() < kFrameHeader) return std::nullopt;
  uint32_t magic, len;
  std::memcpy(&magic, buf.data(), 4);
  std::memcpy(&len, buf.data() + 8, 4);
  if (magic != kFrameMagic) fail("launcher: a frame with a bad magic number (not a Loom launcher at the other end?)");
  const auto type = static_cast<uint8_t>(buf[4]);
  if (type < static_cast<uint8_t>(MsgType::Hello) || type > static_cast<uint8_t>(MsgType::Bye))
    fail("launcher: a frame of unknown type ", static_cast<int>(type));
  if (len > kMaxFrame) fail("launcher: a frame of ", len, " bytes exceeds the limit of ", kMaxFrame);
  if (buf.size() < kFrameHeader + len) return std::nullopt;
  Frame f;
  f.type = static_cast<MsgType>(type);
  f.payload.assign(buf.begin() + kFrameHeader, buf.begin() + static_cast<ptrdiff_t>(kFrameHeader + len));
  buf.erase(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(kFrameHeader + len));
  return f;
}

Hello decode_hello(std::span<const std::byte> p) {
  Reader r(p, "hello");
  Hello m;
  m.protocol = r.u32();
  m.build = r.str();
  m.node = r.u32();
  m.nodes = r.u32();
  m.procs = r.u32();
  m.host = r.str();
  r.end();
  return m;
}

Welcome decode_welcome(std::span<const std::byte> p) {
  Reader r(p, "welcome");
  Welcome m;
  m.job = r.str();
  const uint32_t n = r.count(kMaxNodes);
  for (uint32_t i = 0; i < n; ++i) m.procs.push_back(r.u32());
  const uint32_t h = r.count(kMaxNodes);
  for (uint32_t i = 0; i < h; ++i) m.hosts.push_back(r.str());
  r.end();
  if (m.hosts.size() != m.procs.size()) r.bad(m.procs.size(), " process counts but ", m.hosts.size(), " hosts");
  return m;
}

Status decode_status(std::span<const std::byte> p) {
  Reader r(p, "status");
  Status m;
  m.code = static_cast<int32_t>(r.u32());
  m.why = r.str();
  r.end();
  return m;
}

Fence decode_fence(std::span<const std::byte> p) {
  Reader r(p, "fence");
  Fence m;
  m.seq = r.u64();
  m.blob = r.bytes();
  r.end();
  return m;
}

}  // namespace loom::runtime::launch
