// A Loom program for the launcher tests: every rank brings up the runtime (so the job has
// shared segments), then the rank named by argv[1] fails in the way argv[2] says while the
// others wait forever. The launcher must end the job, name the rank and clean up.
// Mode "vanish": the rank leaves quietly (status 0, so the job goes on) and the others check
// that a SEND and a service call to it fail with a clear error instead of hanging.
// Mode node-lost (in the guests of scripts/vm) has the victim's whole node killed.
// Modes exit, kill, stop and leave (status 0 without the collective teardown) end the victim
// while the others wait in the layer argv[3] names (default: pause; leave: the bootstrap
// barrier): barrier, lock (a shared-region lock the victim holds), dsm-barrier, call (a service
// call to the victim), fetch (a read of a shared-region block the victim holds exclusively),
// invoke (a call_return the victim never runs), rpipe (next() on a pipe whose writer is the
// victim, which never writes). A wait that notices prints "<layer> error" and
// ends with status 14.
// Mode "lock-leave" (= leave lock): the rank takes a shared-region lock and leaves quietly while holding it;
// the others queue for the lock and must name it instead of waiting forever.
// Mode "unflushed": the others write a line and a partial line (no newline, no flush) and wait
// forever; then the victim exits with status 3. loomrun ends the job; what the others wrote must
// reach its output (a rank's buffered stdout was once lost).
// Mode "wait" with a rank outside the job: nobody fails; every rank waits until it is ended.
// Mode "big": every rank asks for 96 MiB of registered memory and writes all of it; where the
// shared-memory file system has less room, the allocation must fail with a clear error (status
// 15) instead of a SIGBUS at the first touch.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/coherence/space.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/invoke/calls.hpp"
#include "loom/rpipe/pipe.hpp"
#include "tests/test_settings_table.hpp"  // the suites' own settings, known to the start-up check

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: crash_helper RANK exit|kill|stop|leave|ok|vanish|lock-leave|big [pause|barrier|lock|dsm-barrier|call|fetch|invoke]\n");
    return 2;
  }
  loom::Runtime rt(argc, argv);
  auto chunk = rt.allocator().allocate_chunk(1 << 20);  // a registered segment on every rank
  std::printf("hello from rank %d\n", rt.rank());
  std::fflush(stdout);
  rt.barrier();
  if (std::strcmp(argv[2], "ok") == 0) {
    rt.allocator().free_chunk(chunk);
    return 0;
  }
  if (std::strcmp(argv[2], "big") == 0) {
    try {
      auto big = rt.allocator().allocate_chunk(96u << 20);
      std::memset(big.bytes(), 1, big.size);
      std::printf("rank %d: wrote 96 MiB of registered memory\n", rt.rank());
      return 0;
    } catch (const loom::Error& e) {
      std::printf("rank %d: allocation error: %s\n", rt.rank(), e.what());
      std::fflush(stdout);
      _exit(15);
    }
  }
  const int victim = std::atoi(argv[1]);
  // A rank outside the job (the launcher tests start "99 wait") names no victim: every rank
  // waits, in the default layer only.
  const bool nobody = victim < 0 || victim >= rt.size();
  if (nobody && (argc > 3 || std::strcmp(argv[2], "wait") != 0)) {
    std::fprintf(stderr, "crash_helper: rank %d is not in a job of %d: only \"wait\" names nobody\n", victim, rt.size());
    return 2;
  }
  if (std::strcmp(argv[2], "unflushed") == 0) {
    if (rt.rank() != victim) std::printf("rank %d: a whole line\nrank %d: a partial line", rt.rank(), rt.rank());
    rt.barrier();
    if (rt.rank() == victim) std::exit(3);
    for (;;) pause();
  }
  if (std::strcmp(argv[2], "vanish") == 0) {
    loom::fabric::QpCaps caps;
    caps.max_recv_wr = 1;
    auto mesh = rt.make_mesh(caps);
    if (rt.rank() == victim) _exit(0);  // no goodbye: as if the process crashed quietly
    // Wait until the victim is gone as far as the provider can tell.
    loom::wait::Backoff b;
    while (rt.provider().peer_alive(victim)) b.pause();
    // The victim posted no receive: the SEND waits (the RNR retry) until it sees the peer gone.
    loom::fabric::Completion c{};
    loom::fabric::SendWr wr;
    wr.opcode = loom::fabric::Opcode::Send;
    wr.local = {chunk.address(), 8, chunk.lkey};
    wr.signaled = true;
    if (mesh->qp(victim).post_send(wr) != loom::fabric::PostResult::Ok) return 10;
    auto& cq = *mesh->send_cqs[static_cast<size_t>(victim)];
    while (cq.poll(std::span(&c, 1)) == 0) b.pause();
    std::printf("rank %d: SEND to vanished rank %d: %s\n", rt.rank(), victim, loom::fabric::to_string(c.status));
    try {
      rt.service().call_sync(victim, loom::runtime::Service::id_of("loom.memory.allocate"), {});
      std::printf("rank %d: service call to vanished rank %d returned\n", rt.rank(), victim);
      return 11;
    } catch (const loom::Error& e) {
      std::printf("rank %d: service call error: %s\n", rt.rank(), e.what());
    }
    std::fflush(stdout);
    _exit(c.status == loom::fabric::Status::PeerUnreachable ? 0 : 12);  // the barrier partner is gone
  }
  // The matrix: the victim ends in way argv[2] while the others wait in layer argv[3].
  const std::string way = argv[2];
  std::string layer = argc > 3 ? argv[3] : "pause";
  if (way == "leave" && argc <= 3) layer = "barrier";
  if (way == "lock-leave") layer = "lock";
  const bool leave = way == "leave" || way == "lock-leave";
  std::optional<loom::coherence::Space> dsm;
  std::optional<loom::coherence::Lock> lock;
  // A call the victim never answers: whatever ends the wait is the victim's end.
  const uint32_t hold = rt.service().register_handler("crash_helper.hold", [](const loom::runtime::ServiceRequest&) {
    for (;;) pause();
    return std::vector<std::byte>{};
  });
  if (layer == "fetch") setenv("LOOM_COHERENCE_EXCLUSIVE", "always", 1);  // a written block is claimed at its release
  if (layer == "lock" || layer == "dsm-barrier" || layer == "fetch") dsm.emplace(rt);  // collective
  if (layer == "lock") {
    lock.emplace(dsm->make_lock());
    if (rt.rank() == victim) lock->lock();  // the victim ends holding it
  }
  volatile uint64_t* word = nullptr;
  const std::vector<int> pids = rt.bootstrap().allgather_value(static_cast<int>(getpid()));
  const int victim_pid = nobody ? -1 : pids[static_cast<size_t>(victim)];  // (read past the end under "99 wait" before)
  if (layer == "fetch") {
    word = dsm->create_region(1 << 20).new_array<uint64_t>(512);  // collective
    if (rt.rank() == victim) word[0] = 42;
    dsm->barrier();  // the victim's release claims the block: only it wrote it, nobody shares it
  }
  std::optional<loom::invoke::Invoker> inv;
  if (layer == "invoke") {
    inv.emplace(rt);  // collective
    // Every channel to the victim is set up (a service call on first use) and used once, so
    // the later wait is for the victim's thread to run a call, nothing else.
    static std::atomic<int> warmed{0};
    if (rt.rank() == victim) {
      inv->wait_until([&] { return warmed.load() == rt.size() - 1; });
    } else {
      loom::invoke::ReturnSlot<int> slot;
      loom::invoke::call_return(loom::invoke::Thread{victim, 0}, [] { return warmed.fetch_add(1); }, slot);
      (void)slot.get();
    }
  }
  std::vector<std::unique_ptr<loom::rpipe::Pipe>> pipes;  // the victim writes to each other rank
  if (layer == "rpipe") {
    using loom::rpipe::Pipe;
    for (int r = 0; r < rt.size(); ++r) {
      if (r == rt.rank() || (r != victim && rt.rank() != victim)) continue;
      const auto end = rt.rank() == victim ? loom::rpipe::End::Writer : loom::rpipe::End::Reader;
      pipes.push_back(std::make_unique<Pipe>(rt, r, end, 1, loom::rpipe::Mode::HalfDuplex));
    }
  }
  rt.barrier();
  if (rt.rank() == victim) {
    if (way == "node-lost") {
      // Inside the test guests of scripts/vm: this rank's whole machine disappears (its qemu is
      // killed by the host), as a node that loses power. The line goes out first (it reaches the
      // first node's launcher through this node's), the request a second later.
      std::printf("rank %d: asking for its node to be killed\n", rt.rank());
      std::fflush(stdout);
      sleep(1);
      // The host polls for request.* files: the line is written under another name and the
      // finished file renamed into place, so the host never reads it half written.
      const std::string name = "request.rank" + std::to_string(rt.rank());
      const std::string draft = "/run/loom-vm/." + name, req = "/run/loom-vm/" + name;
      FILE* f = std::fopen(draft.c_str(), "w");
      if (f == nullptr) {
        std::fprintf(stderr, "crash_helper: node-lost needs the test guests (scripts/vm): cannot write %s\n", draft.c_str());
        return 2;
      }
      std::fprintf(f, "kill %s\n", std::getenv("LOOM_NODE") ? std::getenv("LOOM_NODE") : "0");
      if (std::fclose(f) != 0 || std::rename(draft.c_str(), req.c_str()) != 0) {
        std::fprintf(stderr, "crash_helper: cannot ask for the node's end through %s\n", req.c_str());
        return 2;
      }
    }
    if (way == "exit") std::exit(3);
    if (way == "kill") raise(SIGKILL);
    if (leave) _exit(0);  // status 0, without the collective teardown
    if (way == "stop") {
      std::printf("rank %d: stopping itself\n", rt.rank());
      std::fflush(stdout);
      raise(SIGSTOP);  // alive, but never answers again
    }
    for (;;) pause();
  }
  try {
    if (layer == "pause") for (;;) pause();
    if (layer == "barrier") rt.barrier();
    if (layer == "lock") lock->lock();
    if (layer == "dsm-barrier") dsm->barrier();
    if (layer == "call") rt.service().call_sync(victim, hold, {});
    if (layer == "fetch") {
      // Read once the victim has ended or stopped: its service thread would give the block up.
      for (char s = 'R'; s == 'R' || s == 'S' || s == 'D'; s = loom::runtime::PeerWatch::process_state(victim_pid)) usleep(1000);
      if (word[0] != 42) return 12;  // a plain read: the fault asks the owner to give the block up
    }
    if (layer == "invoke") {
      loom::invoke::ReturnSlot<int> slot;
      loom::invoke::call_return(loom::invoke::Thread{victim, 0}, [] { return 7; }, slot);
      (void)slot.get();
    }
    if (layer == "rpipe") (void)pipes.front()->next();
    std::printf("rank %d: the %s wait returned although rank %d is gone\n", rt.rank(), layer.c_str(), victim);
    return 13;
  } catch (const loom::Error& e) {
    std::printf("rank %d: %s error: %s\n", rt.rank(), layer.c_str(), e.what());
    std::fflush(stdout);
    _exit(14);  // the job cannot go on without the rank
  }
}
