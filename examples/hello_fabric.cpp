// The Loom substrate in one page: every rank allocates memory in its right neighbour's NUMA
// zone (a service call), writes a greeting there with one-sided RDMA WRITE, reads it back, and
// adds to a counter on rank 0 with FETCH_ADD. Run: loomrun -n 4 ./hello_fabric
#include <cstdio>
#include <cstring>
#include <string>

#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/dsm/runtime/runtime.hpp"

int main(int argc, char** argv) {
  loom::Runtime rt(argc, argv);
  const int me = rt.rank(), n = rt.size(), right = (me + 1) % n;

  // A full mesh of queue pairs, each driven by a Transmitter (selective signaling is automatic).
  auto mesh = rt.make_mesh(loom::fabric::QpCaps{});

  // Local registered memory: staging for outgoing data, plus one counter word on rank 0.
  loom::memory::RDMAMemory local = rt.allocator().allocate_chunk(1 << 20);
  struct Where {
    uint64_t addr;
    uint32_t rkey;
    uint32_t pad;
  } counter{local.address(), local.rkey, 0};
  std::memset(local.addr, 0, 64);
  auto all = rt.bootstrap().allgather(std::as_bytes(std::span(&counter, 1)));
  std::memcpy(&counter, all[0].data(), sizeof counter);

  // Memory in the right neighbour's zone, allocated without its application thread's help.
  loom::RemoteMemoryLocator remote = loom::remote_allocate(rt, right, 256);

  std::string text = "hello from " + loom::this_thread_name().str() + " to rank " + std::to_string(right);
  std::memcpy(local.bytes() + 4096, text.c_str(), text.size() + 1);
  loom::fabric::SendWr wr;
  wr.opcode = loom::fabric::Opcode::Write;
  wr.local = {local.address() + 4096, static_cast<uint32_t>(text.size() + 1), local.lkey};
  wr.remote_addr = remote.addr;
  wr.rkey = remote.rkey;
  auto& tx = mesh->tx(right);
  tx.post(wr);

  wr.opcode = loom::fabric::Opcode::Read;  // read it back into another buffer
  wr.local = {local.address() + 8192, static_cast<uint32_t>(text.size() + 1), local.lkey};
  auto read = tx.post(wr);

  loom::fabric::SendWr add;
  add.opcode = loom::fabric::Opcode::FetchAdd;
  add.local = {local.address() + 64, 8, local.lkey};
  add.remote_addr = counter.addr;
  add.rkey = counter.rkey;
  add.compare_add = static_cast<uint64_t>(me + 1);
  auto added = mesh->tx(0).post(add);

  tx.wait(read.tag);  // the flush number proves the READ (and the WRITE before it) complete
  mesh->tx(0).wait(added.tag);
  std::printf("read back from rank %d: \"%s\"\n", right, reinterpret_cast<const char*>(local.bytes() + 8192));
  rt.barrier();
  if (me == 0) {
    uint64_t total = *reinterpret_cast<volatile uint64_t*>(local.bytes());
    std::printf("counter on rank 0 = %llu (expected %d): %s\n", static_cast<unsigned long long>(total), n * (n + 1) / 2,
                total == static_cast<uint64_t>(n * (n + 1) / 2) ? "ok" : "WRONG");
    if (total != static_cast<uint64_t>(n * (n + 1) / 2)) return 1;
  }
  loom::remote_free(rt, remote);
  rt.barrier();
  rt.allocator().free_chunk(local);
  return 0;
}
