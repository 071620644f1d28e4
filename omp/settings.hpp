#pragma once
// The OpenMP layer's settings (besides OpenMP's own OMP_SCHEDULE and OMP_NUM_THREADS).
#include "loom/dsm/common/settings_check.hpp"

namespace loom::omp::settings {

using loom::settings::Setting;
using T = loom::settings::Type;

inline constexpr Setting kStack{"LOOM_OMP_STACK", T::Size, "16M", "1M..1024M",
                                "the stack main runs on in rank 0, shared so that every thread reads the master's frames"};

inline constexpr Setting kInlineAtomics{
    "LOOM_OMP_INLINE_ATOMICS", T::Choice, "emulate", "emulate|native",
    "the program's locked instructions (omp atomic, scalar reductions) at 2 processes or more: emulate (each is a "
    "breakpoint carried out atomically across processes) or native (left alone: atomic within a process only)"};

inline constexpr Setting kHeap{"LOOM_OMP_HEAP", T::Size, "64M", "16M..1024G",
                               "the shared heap the program's malloc and new draw on while the layer runs, cut into one slice "
                               "per process (each process allocates from its own); every process commits a public copy of it "
                               "as registered memory, so start-up time and memory grow with it"};

inline constexpr Setting kHeapBlock{"LOOM_OMP_HEAP_BLOCK", T::Size, "64K", "4K..1M",
                                    "the shared heap's coherence block (a power of two): the unit of its faults, diffs and "
                                    "invalidations; larger blocks cost fewer faults on large arrays and more false sharing on "
                                    "small objects"};

inline constexpr Setting kStats{"LOOM_OMP_STATS", T::Bool, "0", "",
                                "print each process's coherence counters (faults, misses, twins, releases, notices) to "
                                "stderr when the program ends"};

// Set by the layer itself when it starts the program again with address randomization off.
inline constexpr Setting kRestarted{"LOOM_OMP_RESTARTED", T::Bool, "0", "",
                                    "set by the layer when it has started the program again with address randomization off"};

inline constexpr const Setting* kAll[] = {&kStack, &kInlineAtomics, &kHeap, &kHeapBlock, &kStats, &kRestarted};
inline constexpr loom::settings::Table kTable{"omp", kAll};
inline const bool kRegistered = loom::settings::register_table(kTable);  // for the start-up check

}  // namespace loom::omp::settings
