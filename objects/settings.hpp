#pragma once
// The objects layer's settings (read by the cost model and Auto objects).
#include "loom/dsm/common/settings_check.hpp"

namespace loom::objects::settings {

using loom::settings::Setting;
using T = loom::settings::Type;

inline constexpr Setting kCalibration{"LOOM_OBJECTS_CALIBRATION", T::String, "",
                                      "", "the calibration file loom-calibrate writes and Auto objects read"};
inline constexpr Setting kAdapt{"LOOM_OBJECTS_ADAPT", T::Bool, "1", "",
                                "Auto objects switch policy when measured latencies depart from the model"};

inline constexpr Setting kDirect{"LOOM_OBJECTS_DIRECT", T::Bool, "1", "",
                                 "one-sided operations on peer memory the provider maps (shm) are CPU loads, stores and atomics on it; 0: fabric requests"};

inline constexpr const Setting* kAll[] = {&kCalibration, &kAdapt, &kDirect};
inline constexpr loom::settings::Table kTable{"objects", kAll};
inline const bool kRegistered = loom::settings::register_table(kTable);  // for the start-up check

}  // namespace loom::objects::settings
