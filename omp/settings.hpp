#pragma once
// The OpenMP layer's settings (besides OpenMP's own OMP_SCHEDULE and OMP_NUM_THREADS).
#include "loom/dsm/common/settings.hpp"

namespace loom::omp::settings {

using loom::settings::Setting;
using T = loom::settings::Type;

inline constexpr Setting kStack{"LOOM_OMP_STACK", T::Size, "16M", "1M..1024M",
                                "the stack main runs on in rank 0, shared so that every thread reads the master's frames"};

inline constexpr const Setting* kAll[] = {&kStack};
inline constexpr loom::settings::Table kTable{"omp", kAll};

}  // namespace loom::omp::settings
