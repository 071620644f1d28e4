// The emulated wire's presets, its parser, the node split and the timing of one request.
#include "loom/dsm/fabric/shm/wire_model.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "loom/dsm/common/error.hpp"

namespace loom::fabric::shm {

namespace {
WireSpec make_spec(std::string name, double latency_us, double gbps, double mmsgs) {
  return WireSpec{std::move(name), latency_us * 1000.0, gbps, mmsgs > 0 ? 1000.0 / mmsgs : 0.0};
}

[[noreturn]] void refuse(std::string_view text, const char* why) {
  std::string names;
  for (const auto& p : wire_presets()) names += (names.empty() ? "" : ", ") + p.name;
  fail("LOOM_WIRE=", text, ": ", why, "; give a preset (", names,
       ") or LATENCY_US,GBPS[,MMSGS] (one-way latency in microseconds, bandwidth per link in GB/s, message rate per "
       "link in millions a second), e.g. 2,10,20");
}

double number(std::string_view text, std::string_view whole, double lo, double hi) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) refuse(whole, "not a number");
  if (v < lo || v > hi) refuse(whole, "a value is out of range (latency 0.01..100000 us, bandwidth 0.001..1000 GB/s, "
                                      "message rate 0.001..10000 M/s)");
  return v;
}
}  // namespace

const std::vector<WireSpec>& wire_presets() {
  static const std::vector<WireSpec> presets = {
      make_spec("ib-edr", 1.0, 12.0, 10.0),
      make_spec("roce-25g", 1.5, 2.9, 8.0),
      make_spec("tcp-10g", 12.5, 1.15, 1.0),
  };
  return presets;
}

WireSpec parse_wire(std::string_view text) {
  if (text.empty()) return {};
  for (const auto& p : wire_presets())
    if (p.name == text) return p;
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) refuse(text, "not a preset, and not two or three numbers");
  const double lat = number(parts[0], text, 0.01, 100000), bw = number(parts[1], text, 0.001, 1000);
  const double rate = parts.size() == 3 ? number(parts[2], text, 0.001, 10000) : 0;
  return make_spec(std::string(text), lat, bw, rate);
}

std::vector<int> emulated_nodes(int size, int nodes) {
  if (size < 1) fail("emulated nodes: a job of ", size, " ranks");
  if (nodes < 1 || nodes > size)
    fail("LOOM_EMULATE_NODES=", nodes, ": a job of ", size, " ranks can be split over 1 to ", size, " emulated nodes");
  std::vector<int> node(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) node[static_cast<size_t>(r)] = static_cast<int>(int64_t{r} * nodes / size);
  return node;
}

uint64_t take_link(std::atomic<uint64_t>& free_at, uint64_t from, uint64_t busy) {
  uint64_t cur = free_at.load(std::memory_order_relaxed);
  uint64_t start;
  do {
    start = std::max(cur, from);
  } while (!free_at.compare_exchange_weak(cur, start + busy, std::memory_order_relaxed));
  return start;
}

uint64_t wire_busy_ns(const WireSpec& w, uint64_t bytes) {
  return static_cast<uint64_t>(std::llround(std::max(static_cast<double>(bytes) / w.bytes_per_ns, w.message_gap_ns)));
}

WireTimes wire_schedule(const WireSpec& w, Opcode op, uint64_t len, uint64_t now, LinkClock& src, LinkClock& dst) {
  const auto lat = static_cast<uint64_t>(std::llround(w.latency_ns));
  const auto busy = [&](uint64_t bytes) { return wire_busy_ns(w, bytes); };
  WireTimes t;
  if (op == Opcode::Write || op == Opcode::WriteWithImm || op == Opcode::Send) {
    const uint64_t b = busy(len);
    const uint64_t out = take_link(src.tx_free, now, b);
    const uint64_t in = take_link(dst.rx_free, out + lat, b);
    t.effect = in + b;
    t.complete = t.effect + lat;
    return t;
  }
  // READ and atomics: the request (no payload) out and in, the payload back.
  const uint64_t rb = busy(0);
  const uint64_t req_out = take_link(src.tx_free, now, rb);
  const uint64_t req_in = take_link(dst.rx_free, req_out + lat, rb);
  t.effect = req_in + rb;
  const uint64_t b = busy(op == Opcode::Read ? len : 8);
  const uint64_t back_out = take_link(dst.tx_free, t.effect, b);
  const uint64_t back_in = take_link(src.rx_free, back_out + lat, b);
  t.complete = back_in + b;
  return t;
}

}  // namespace loom::fabric::shm
