#pragma once
// The kernel's floors for a page-protection DSM, measured in the benchmark's own run: a trap
// (a fault whose handler only opens the page) and a protection change, alone and beside a
// running thread of the same process (bench/README.md, "What the kernel costs").
namespace loom::bench {

// A fault on an inaccessible page whose handler only makes it writable (signal delivery,
// sigreturn, mprotect), with the process's threads as they are.
double page_fault_floor_us(int pages);

struct ProtectFloors {
  double bare = 0;             // in a child of one thread (fork): nothing else of the process runs
  double in_process = 0;       // in this process, its other threads (Loom's) as they are
  double sibling_running = 0;  // in this process with one more thread spinning on a CPU
};
// One mprotect of one page of a large mapping (alternately read-only and read-write).
ProtectFloors protect_floors_us(int changes);

}  // namespace loom::bench
