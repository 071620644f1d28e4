#pragma once
// The program's inline atomics made atomic across processes. GCC carries out `omp atomic` and
// scalar reductions with locked instructions on the shared variable (`lock add`, a `lock
// cmpxchg` loop for floating point); on a DSM each process would apply them to its own copy and
// the merge at the next barrier would keep one process's result. So every such instruction in
// the executable's code is replaced by a breakpoint (INT3) when the layer starts, and the
// SIGTRAP handler carries it out: on region memory under a DSM lock (acquire, read, write,
// release: the new value reaches every process at its next acquire, and a `lock cmpxchg` loop
// that read a stale value fails once and retries with the current one), elsewhere (a thread's
// stack, private memory) with an atomic on the memory itself. Registers and flags are left as
// the instruction would leave them. GCC's full fence (`omp flush`, `lock or $0, (%rsp)`) is a
// fence across processes: a release, then an acquire (AtomicRouter::fence).
#include <cstdint>
#include <span>
#include <vector>

#include "loom/omp/atomic_sites.hpp"
#include "loom/omp/program_data.hpp"

namespace loom::omp {

// Where an atomic's memory is and how to make a shared one atomic across processes.
class AtomicRouter {
 public:
  virtual ~AtomicRouter() = default;
  virtual bool shared(uintptr_t address) = 0;  // region memory
  virtual void lock(uintptr_t address) = 0;    // acquire: a DSM lock for the address's line
  virtual void unlock(uintptr_t address) = 0;  // release
  // A full fence across processes: this process's writes are published, and what any process
  // published by a fence before is seen.
  virtual void fence() = 0;
};

struct InlineAtomicStats {
  uint64_t sites = 0;        // instructions replaced
  uint64_t unsupported = 0;  // locked instructions left as they are (listed by unsupported_atomics)
  uint64_t shared = 0;       // carried out on region memory
  uint64_t local = 0;        // carried out on other memory
  uint64_t fences = 0;       // of the sites, GCC's full fences (`omp flush`)
  uint64_t fences_run = 0;   // fences carried out across processes
  uint64_t first_fence = 0;  // the first one's address
};

// Once per process, before other threads run: replaces every atomic in `code` and installs the
// SIGTRAP handler (another SIGTRAP goes to the handler that was there before). The router is
// consulted from then on; set_atomic_router(nullptr) makes every atomic local again.
void replace_inline_atomics(std::span<const PageRange> code, AtomicRouter* router);
void set_atomic_router(AtomicRouter* router);
InlineAtomicStats inline_atomic_stats();
std::vector<AtomicSite> unsupported_atomics();

}  // namespace loom::omp
