#pragma once
// Shared by the layer's libgomp entry points (gomp_*.cpp, omp_api.cpp).
#include "loom/omp/layer.hpp"
#include "loom/omp/shared_heap.hpp"
#include "loom/omp/team.hpp"

namespace loom::omp {

Layer& layer();  // the process's layer; an error before it starts or after it ends
int region_depth();  // regions the calling thread is inside
// The team size a region without a num_threads clause asks for: omp_set_num_threads's, else
// OMP_NUM_THREADS's first entry, else 0 (the whole team).
unsigned requested_threads();
// fn(arg) on a private stack when the calling thread is rank 0's master running main on the
// shared stack (start.cpp), else directly: the protocol must not run on region memory.
void on_private_stack(void (*fn)(void*), void* arg);
// A critical section (or omp lock) named by an address (nullptr: the unnamed one).
void critical_start(const void* name);
void critical_end(const void* name);
bool critical_try(const void* name);  // critical_start if the section is free now
// While set, a SIGSEGV handler the program installs goes behind the region layer's (signals.cpp).
void keep_segv_handler_first(bool yes);
// The program's heap (malloc.cpp): from start_program_heap on, what code in [code_lo, code_hi)
// allocates comes from `heap`; from stop_program_heap on, from the C library again (blocks of
// the heap are still freed into it).
void start_program_heap(SharedHeap* heap, uintptr_t code_lo, uintptr_t code_hi);
void stop_program_heap();
// Whether the program's malloc calls reach this library (not a sanitizer's runtime first).
bool program_heap_reachable();
// Starts a region (combined with a loop every thread starts first, when `loop` is given).
void start_region(Outlined fn, void* data, unsigned num_threads, const LoopSpec* loop);

}  // namespace loom::omp
