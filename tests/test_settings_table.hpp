#pragma once
// Settings the test suites read (not Loom's own).
#include "loom/dsm/common/settings_check.hpp"

namespace loom::test_settings {

using loom::settings::Setting;
using T = loom::settings::Type;

inline constexpr Setting kStressThreads{"LOOM_TEST_STRESS_THREADS", T::Int, "4", "1..64", "threads sharing one Transmitter in the stress test"};
inline constexpr Setting kStressPosts{"LOOM_TEST_STRESS_POSTS", T::Int, "1000000", "1..10000000000", "posts in the stress test"};
inline constexpr Setting kDsmPrograms{"LOOM_TEST_DSM_PROGRAMS", T::Int, "1000", "1..1000000000", "random programs per policy in the coherence checker"};
inline constexpr Setting kDsmSeed{"LOOM_TEST_DSM_SEED", T::Int, "", "0..4611686018427387903",
                                  "seed of the first checker program (default: a new one each run, printed)"};
inline constexpr Setting kQpSingleThread{"LOOM_TEST_QP_SINGLE_THREAD", T::Bool, "0", "", "run the fabric suite on thread-domain queue pairs"};
inline constexpr Setting kExpectBootstrap{"LOOM_EXPECT_BOOTSTRAP", T::Choice, "embedded", "embedded|rendezvous|pmix", "the bootstrap the service suite must find"};

inline constexpr Setting kSameLayout{"LOOM_TEST_SAME_LAYOUT", T::Bool, "0", "",
                                     "the in-place coherence suite expects every process's regions at one address"};

inline constexpr const Setting* kAll[] = {&kStressThreads, &kStressPosts, &kDsmPrograms, &kDsmSeed, &kQpSingleThread, &kExpectBootstrap, &kSameLayout};
inline constexpr loom::settings::Table kTable{"tests", kAll};
inline const bool kRegistered = loom::settings::register_table(kTable);  // for the start-up check

}  // namespace loom::test_settings
