// A Loom program for the launcher tests: every rank brings up the runtime (so the job has
// shared segments), then the rank named by argv[1] fails in the way argv[2] says while the
// others wait forever. The launcher must end the job, name the rank and clean up.
// Mode "vanish": the rank leaves quietly (status 0, so the job goes on) and the others check
// that a SEND and a service call to it fail with a clear error instead of hanging.
// Mode "lock-leave": the rank takes a shared-region lock and leaves quietly while holding it;
// the others queue for the lock and must name it instead of waiting forever.
// Mode "big": every rank asks for 96 MiB of registered memory and writes all of it; where the
// shared-memory file system has less room, the allocation must fail with a clear error (status
// 15) instead of a SIGBUS at the first touch.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coherence/space.hpp"
#include "dsm/runtime/runtime.hpp"
#include "dsm/common/backoff.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: crash_helper RANK exit|kill|ok|vanish|leave|lock-leave|big\n");
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
  if (rt.rank() == victim) {
    if (std::strcmp(argv[2], "exit") == 0) std::exit(3);
    if (std::strcmp(argv[2], "kill") == 0) raise(SIGKILL);
    if (std::strcmp(argv[2], "leave") == 0) _exit(0);  // status 0, without the collective teardown
  }
  if (std::strcmp(argv[2], "leave") == 0) {
    rt.barrier();  // the others wait for the rank that left
    return 0;
  }
  if (std::strcmp(argv[2], "lock-leave") == 0) {
    loom::coherence::Space dsm(rt);
    loom::coherence::Lock l = dsm.make_lock();
    if (rt.rank() == victim) l.lock();
    rt.barrier();
    if (rt.rank() == victim) _exit(0);  // holding the lock, without the collective teardown
    try {
      l.lock();
      std::printf("rank %d: took the lock its holder left with\n", rt.rank());
      return 13;
    } catch (const loom::Error& e) {
      std::printf("rank %d: lock error: %s\n", rt.rank(), e.what());
      std::fflush(stdout);
      _exit(14);  // the job cannot go on: the lock is lost
    }
  }
  for (;;) pause();
}
