// The launcher's pieces in one process: host lists and hostfiles, the launchers' wire format,
// the key aliases of the shm+verbs provider, every rank's place in the job, shell quoting, and
// the rendezvous server driven by hand-made nodes (welcome, refusals, fences, a lost node, a
// failure held while another node is silent).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/job_layout.hpp"
#include "loom/dsm/runtime/launch/build_id.hpp"
#include "loom/dsm/runtime/launch/hosts.hpp"
#include "loom/dsm/runtime/launch/node_wire.hpp"
#include "loom/dsm/runtime/launch/options.hpp"
#include "loom/dsm/runtime/launch/rendezvous.hpp"
#include "loom/dsm/runtime/transports.hpp"
#ifdef LOOM_HAVE_VERBS
#include "loom/dsm/fabric/hybrid/alias_table.hpp"
#endif

using namespace loom;
using namespace loom::runtime;
using namespace loom::runtime::launch;

namespace {

TEST(HostList, CountsDefaultToOneAndBadEntriesAreErrors) {
  auto h = parse_host_list("a:2,b,c.example:4");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "a");
  EXPECT_EQ(h[0].procs, 2);
  EXPECT_EQ(h[1].procs, 1);
  EXPECT_EQ(h[2].host, "c.example");
  EXPECT_EQ(h[2].procs, 4);
  for (const char* bad : {"", "a:0", "a:x", "a:2000", "a b", ",", "a:2,", "a;b"}) EXPECT_THROW(parse_host_list(bad), Error) << bad;
}

TEST(HostList, HostfileFormsAndLineNumbers) {
  auto h = parse_hostfile_text("# nodes\nnodeA slots=2\n\nnodeB:3  # fast\nnodeC 1\nnodeD\n", "hf");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].procs, 2);
  EXPECT_EQ(h[1].host, "nodeB");
  EXPECT_EQ(h[1].procs, 3);
  EXPECT_EQ(h[2].procs, 1);
  EXPECT_EQ(h[3].procs, 1);
  try {
    parse_hostfile_text("a\nb:2 3\n", "hf");
    FAIL() << "two counts accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hf line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hostfile_text("a 2 extra\n", "hf"), Error);
  EXPECT_THROW(parse_hostfile_text("# nothing\n", "hf"), Error);
}

TEST(HostList, RendezvousAddress) {
  std::string host;
  int port = 0;
  split_host_port("node0:29400", host, port);
  EXPECT_EQ(host, "node0");
  EXPECT_EQ(port, 29400);
  for (const char* bad : {"node0", ":80", "h:0", "h:70000", "h:x", "h:"}) EXPECT_THROW(split_host_port(bad, host, port), Error) << bad;
}

// The launcher of every other node gets the options that shape its processes.
TEST(HostList, NodeCommandsCarryTheProcessOptions) {
  char prog[] = "prog", arg[] = "--flag";
  char* argv[] = {prog, arg, nullptr};
  Options o;
  o.hosts = {{"a", 2}, {"b", 3}};
  o.threads = "2";
  o.map_by = "zone";
  o.same_layout = true;
  o.prefix = false;
  o.program = 0;
  const auto c = node_command(o, argv, 1, "198.18.0.1", 29400);
  auto has = [&](const std::string& w) { return std::find(c.begin(), c.end(), w) != c.end(); };
  EXPECT_TRUE(has("--same-layout"));
  EXPECT_TRUE(has("--no-prefix"));
  ASSERT_TRUE(has("--threads"));
  EXPECT_EQ(*(std::find(c.begin(), c.end(), "--threads") + 1), "2");
  ASSERT_TRUE(has("--map-by"));
  EXPECT_EQ(*(std::find(c.begin(), c.end(), "--map-by") + 1), "zone");
  EXPECT_EQ(*(std::find(c.begin(), c.end(), "-n") + 1), "3");
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[c.size() - 3], "--");
  EXPECT_EQ(c.back(), "--flag");
  o.same_layout = false;
  const auto d = node_command(o, argv, 0, "198.18.0.1", 29400);
  EXPECT_EQ(std::find(d.begin(), d.end(), "--same-layout"), d.end());
}

TEST(HostList, ShellQuotingSurvivesTheRemoteShell) {
  EXPECT_EQ(shell_quote("plain/path-1.0"), "plain/path-1.0");
  for (std::string w : {std::string("two words"), std::string("it's"), std::string("$HOME;`x`"), std::string(""), std::string("a\"b")}) {
    FILE* p = popen(("printf %s " + shell_quote(w)).c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256] = {};
    const size_t n = fread(buf, 1, sizeof buf - 1, p);
    pclose(p);
    EXPECT_EQ(std::string(buf, n), w);
  }
}

TEST(NodeWire, MessagesRoundTrip) {
  Hello h;
  h.build = "0.1.0+abc";
  h.node = 1;
  h.nodes = 2;
  h.procs = 4;
  h.host = "loom-node1";
  auto buf = encode(h);
  auto f = take_frame(buf);
  ASSERT_TRUE(f);
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(f->type, MsgType::Hello);
  const Hello back = decode_hello(f->payload);
  EXPECT_EQ(back.build, h.build);
  EXPECT_EQ(back.node, 1u);
  EXPECT_EQ(back.procs, 4u);
  EXPECT_EQ(back.host, "loom-node1");

  Welcome w{"job", {2, 2}, {"a", "b"}};
  buf = encode(w);
  const Welcome wb = decode_welcome(take_frame(buf)->payload);
  EXPECT_EQ(wb.procs, w.procs);
  EXPECT_EQ(wb.hosts, w.hosts);

  Fence fence{7, {std::byte{1}, std::byte{2}}};
  buf = encode(MsgType::FenceUp, fence);
  auto ff = take_frame(buf);
  EXPECT_EQ(ff->type, MsgType::FenceUp);
  EXPECT_EQ(decode_fence(ff->payload).blob, fence.blob);

  buf = encode(MsgType::Abort, Status{137, "lost ranks 2-3 on b"});
  const Status s = decode_status(take_frame(buf)->payload);
  EXPECT_EQ(s.code, 137);
  EXPECT_EQ(s.why, "lost ranks 2-3 on b");
}

TEST(NodeWire, FramesArriveWholeOrNotAtAll) {
  auto one = encode_empty(MsgType::Heartbeat);
  auto two = encode(MsgType::Done, Status{0, ""});
  std::vector<std::byte> stream(one);
  stream.insert(stream.end(), two.begin(), two.begin() + 5);
  EXPECT_EQ(take_frame(stream)->type, MsgType::Heartbeat);
  EXPECT_FALSE(take_frame(stream));
  stream.insert(stream.end(), two.begin() + 5, two.end());
  EXPECT_EQ(take_frame(stream)->type, MsgType::Done);
}

TEST(NodeWire, MalformedInputIsAnError) {
  auto good = encode(Hello{});
  auto bad_magic = good;
  bad_magic[0] = std::byte{0};
  EXPECT_THROW(take_frame(bad_magic), Error);
  auto bad_type = good;
  bad_type[4] = std::byte{99};
  EXPECT_THROW(take_frame(bad_type), Error);
  auto too_long = good;
  const uint32_t huge = kMaxFrame + 1;
  std::memcpy(too_long.data() + 8, &huge, 4);
  EXPECT_THROW(take_frame(too_long), Error);
  auto f = take_frame(good);
  auto cut = f->payload;
  cut.pop_back();
  EXPECT_THROW(decode_hello(cut), Error);
  auto longer = f->payload;
  longer.push_back(std::byte{0});
  EXPECT_THROW(decode_hello(longer), Error);
  // A welcome whose counts and hosts disagree, and one with a count over the limit.
  auto w = encode(Welcome{"j", {1, 2}, {"a"}});
  EXPECT_THROW(decode_welcome(take_frame(w)->payload), Error);
  std::vector<std::byte> many(4 + 4 + 4);
  const uint32_t zero = 0, lots = 1u << 30;
  std::memcpy(many.data(), &zero, 4);
  std::memcpy(many.data() + 4, &lots, 4);
  EXPECT_THROW(decode_welcome(many), Error);
}

TEST(NodeWire, JoinedPartsAreNodeOrdered) {
  auto joined = join_parts({{std::byte{1}}, {}, {std::byte{2}, std::byte{3}}});
  ASSERT_EQ(joined.size(), 4u + 8 + 1 + 8 + 8 + 2);
  uint32_t n;
  std::memcpy(&n, joined.data(), 4);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(joined[12], std::byte{1});
  EXPECT_EQ(joined.back(), std::byte{3});
}

#ifdef LOOM_HAVE_VERBS
TEST(KeyAliases, FoundUntilErasedAndBoundedByTheProbeRange) {
  auto f = std::make_unique<fabric::hybrid::AliasFile>();
  for (auto& s : f->slot) s.store(0);
  using fabric::hybrid::alias_find;
  using fabric::hybrid::alias_insert;
  using fabric::hybrid::alias_erase;
  EXPECT_TRUE(alias_insert(f.get(), 0x1234, 0x10001));
  EXPECT_TRUE(alias_insert(f.get(), 0x5678, 0x20001));
  EXPECT_EQ(alias_find(f.get(), 0x1234), 0x10001u);
  EXPECT_EQ(alias_find(f.get(), 0x5678), 0x20001u);
  EXPECT_EQ(alias_find(f.get(), 0x9999), 0u);
  EXPECT_EQ(alias_find(f.get(), 0), 0u);
  EXPECT_TRUE(alias_insert(f.get(), 0x1234, 0x10002));  // the device reused the key
  EXPECT_EQ(alias_find(f.get(), 0x1234), 0x10002u);
  alias_erase(f.get(), 0x1234);
  EXPECT_EQ(alias_find(f.get(), 0x1234), 0u);
  EXPECT_EQ(alias_find(f.get(), 0x5678), 0x20001u);  // a neighbour emptied does not hide it
  // Keys sharing one home fill its probe range, then the next is refused.
  std::vector<uint32_t> same;
  for (uint32_t k = 1; same.size() < fabric::hybrid::kProbe + 1; ++k)
    if (fabric::hybrid::alias_home(k) == fabric::hybrid::alias_home(0x5678) && k != 0x5678) same.push_back(k);
  for (size_t i = 0; i + 2 < same.size(); ++i) EXPECT_TRUE(alias_insert(f.get(), same[i], 7)) << i;
  EXPECT_FALSE(alias_insert(f.get(), same.back(), 7));
  for (size_t i = 0; i + 2 < same.size(); ++i) EXPECT_EQ(alias_find(f.get(), same[i]), 7u);
}
#endif

TEST(JobLayout, PlacesRoundTripAndMalformedOnesAreErrors) {
  RankPlace p{1234, "node-a", "boot-1", "77-ab", "/dev/shm/loom-77-ab", "0.1.0"};
  const std::string e = encode_place(p);
  const RankPlace b = decode_place(std::as_bytes(std::span(e.data(), e.size())), 3);
  EXPECT_EQ(b.pid, 1234);
  EXPECT_EQ(b.host, "node-a");
  EXPECT_EQ(b.job_dir, p.job_dir);
  for (std::string bad : {std::string("x\na\nb\nc\nd\ne"), std::string("12\na\nb"), std::string("0\na\nb\nc\nd\ne"),
                          std::string("12\n\nb\nc\nd\ne")}) {
    try {
      decode_place(std::as_bytes(std::span(bad.data(), bad.size())), 3);
      FAIL() << "accepted: " << bad;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("rank 3"), std::string::npos) << err.what();
    }
  }
  p.host = "bad\nname";
  EXPECT_THROW(encode_place(p), Error);
}

TEST(JobLayout, HostsAreNameAndBootIdAndBuildsMustMatch) {
  std::vector<RankPlace> r(4);
  r[0] = {1, "b", "x", "j", "/d", "v1"};
  r[1] = {2, "b", "x", "j", "/d", "v1"};
  r[2] = {3, "a", "y", "k", "/e", "v1"};
  r[3] = {4, "b", "z", "k", "/e", "v1"};  // the name of ranks 0-1's host, another machine
  const JobLayout l = make_layout(r);
  EXPECT_EQ(l.hosts(), 3);
  EXPECT_EQ(l.host_names[0], "a");  // sorted by name, then boot id
  EXPECT_EQ(l.host_of[2], 0);
  EXPECT_TRUE(l.same_host(0, 1));
  EXPECT_FALSE(l.same_host(0, 3));
  r[2].build = "v2";
  try {
    make_layout(r);
    FAIL() << "different builds accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 (on a) runs Loom build 'v2'"), std::string::npos) << e.what();
  }
}

TEST(JobLayout, RankListsJoinRuns) {
  EXPECT_EQ(rank_list({3}), "rank 3");
  EXPECT_EQ(rank_list({0, 1, 2, 3}), "ranks 0-3");
  EXPECT_EQ(rank_list({0, 1, 4, 5, 7}), "ranks 0-1, 4-5, 7");
}

// ---- the rendezvous server, driven by hand-made nodes ----------------------------------------

class FakeNode {
 public:
  explicit FakeNode(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~FakeNode() { ::close(fd_); }
  void send(const std::vector<std::byte>& f) { EXPECT_EQ(::send(fd_, f.data(), f.size(), MSG_NOSIGNAL), static_cast<ssize_t>(f.size())); }
  void hello(uint32_t node, uint32_t nodes, const std::string& build = build_id()) {
    Hello h;
    h.build = build;
    h.node = node;
    h.nodes = nodes;
    h.procs = 2;
    h.host = "fake" + std::to_string(node);
    send(encode(h));
  }
  // The next frame other than a heartbeat, while `pump` drives the server.
  std::optional<Frame> next(const std::function<void()>& pump, double seconds = 5) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < until) {
      while (auto f = take_frame(in_))
        if (f->type != MsgType::Heartbeat) return f;
      pump();
      std::byte tmp[4096];
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n > 0) in_.insert(in_.end(), tmp, tmp + n);
      if (n == 0) return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  int fd_;
  std::vector<std::byte> in_;
};

struct Server {
  explicit Server(int nodes, Timing t = Timing{}) : listen(tcp_listen("127.0.0.1", port)), srv(listen, nodes, t) {}
  ~Server() { ::close(listen); }
  void pump() {
    PollSet ps;
    srv.add_to(ps);
    ps.wait(5);
    srv.tick();
  }
  int port = 0;
  int listen;
  RendezvousServer srv;
};

TEST(Rendezvous, AnotherBuildOrJobShapeIsRefusedWithTheReason) {
  Server s(2);
  FakeNode other_build(s.port);
  other_build.hello(1, 2, "9.9.9+old");
  auto f = other_build.next([&] { s.pump(); });
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type, MsgType::Reject);
  EXPECT_NE(decode_status(f->payload).why.find("every node must run the same build"), std::string::npos);
  FakeNode wrong_nodes(s.port);
  wrong_nodes.hello(0, 3);
  f = wrong_nodes.next([&] { s.pump(); });
  ASSERT_TRUE(f);
  EXPECT_NE(decode_status(f->payload).why.find("--nodes 3"), std::string::npos);
  FakeNode a(s.port), twin(s.port);
  a.hello(0, 2);
  for (int i = 0; i < 20; ++i) s.pump();
  twin.hello(0, 2);
  f = twin.next([&] { s.pump(); });
  ASSERT_TRUE(f);
  EXPECT_NE(decode_status(f->payload).why.find("already taken"), std::string::npos);
}

TEST(Rendezvous, WelcomeThenFencesThenGoodbye) {
  Server s(2);
  FakeNode a(s.port), b(s.port);
  b.hello(1, 2);
  a.hello(0, 2);
  auto pump = [&] { s.pump(); };
  for (FakeNode* n : {&a, &b}) {
    auto w = n->next(pump);
    ASSERT_TRUE(w);
    ASSERT_EQ(w->type, MsgType::Welcome);
    EXPECT_EQ(decode_welcome(w->payload).hosts, (std::vector<std::string>{"fake0", "fake1"}));
  }
  b.send(encode(MsgType::FenceUp, Fence{0, {std::byte{0xb}}}));
  a.send(encode(MsgType::FenceUp, Fence{0, {std::byte{0xa}}}));
  for (FakeNode* n : {&a, &b}) {
    auto d = n->next(pump);
    ASSERT_TRUE(d);
    ASSERT_EQ(d->type, MsgType::FenceDown);
    EXPECT_EQ(decode_fence(d->payload).blob, join_parts({{std::byte{0xa}}, {std::byte{0xb}}}));
  }
  a.send(encode(MsgType::Done, Status{0, ""}));
  b.send(encode(MsgType::Done, Status{0, ""}));
  auto bye = a.next(pump);
  ASSERT_TRUE(bye);
  EXPECT_EQ(bye->type, MsgType::Bye);
  EXPECT_TRUE(s.srv.finished());
  EXPECT_EQ(s.srv.status(), 0);
}

TEST(Rendezvous, ANodeNeverArrivingIsNamed) {
  Timing t;
  t.rendezvous_timeout = std::chrono::milliseconds(200);
  Server s(3, t);
  FakeNode a(s.port);
  a.hello(0, 3);
  auto f = a.next([&] { s.pump(); });
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type, MsgType::Abort);
  EXPECT_NE(decode_status(f->payload).why.find("node 1, 2 never arrived"), std::string::npos) << decode_status(f->payload).why;
}

// A rank failing on node 0 while node 1 has gone silent: the job ends naming node 1's ranks
// (the likely cause) once node 1 is found lost, not the rank that saw its peer vanish.
TEST(Rendezvous, AFailureWhileANodeIsSilentNamesTheSilentNode) {
  Timing t;
  t.heartbeat = std::chrono::milliseconds(20);
  t.node_timeout = std::chrono::milliseconds(400);
  Server s(2, t);
  FakeNode a(s.port), b(s.port);
  a.hello(0, 2);
  b.hello(1, 2);
  auto pump = [&] { s.pump(); };
  ASSERT_EQ(a.next(pump)->type, MsgType::Welcome);
  ASSERT_EQ(b.next(pump)->type, MsgType::Welcome);
  // Node 0 keeps beating; node 1 says nothing from now on.
  auto beat_a = [&] {
    a.send(encode_empty(MsgType::Heartbeat));
    s.pump();
  };
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::milliseconds(100)) beat_a();
  a.send(encode(MsgType::Failure, Status{1, "rank 0 (pid 1 on fake0) exited with status 1"}));
  auto f = a.next(beat_a);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->type, MsgType::Abort);
  const Status why = decode_status(f->payload);
  EXPECT_NE(why.why.find("lost ranks 2-3 on fake1"), std::string::npos) << why.why;
  EXPECT_NE(why.code, 0);
}

}  // namespace
