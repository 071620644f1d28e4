// The NAS kernels (bench/nas/) on Loom's shared regions, run under loomrun by every rank
// together: each kernel at each class under each coherence policy must verify against NPB's
// reference values (Nas/Kernels.Verify/cg_S_fixed_dir; --gtest_filter='*_S_*' runs class S; BT
// at S under every policy and at W under the default one).
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "bench/nas/loom_team.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"

namespace loom::test {
namespace {

using Param = std::tuple<std::string, char, std::string>;  // kernel, class, policy

class Kernels : public ::testing::TestWithParam<Param> {};

TEST_P(Kernels, Verify) {
  const auto& [name, cls, policy] = GetParam();
  const nas::Kernel* kernel = nas::find_kernel(name);
  ASSERT_NE(kernel, nullptr);
  coherence::Config cfg = coherence::Config::from_env();
  cfg.policy = coherence::Policy::parse(policy);
  const nas::LoomRun run = nas::run_on_loom(rt(), *kernel, cls, cfg);
  EXPECT_TRUE(run.result.verified) << name << "." << cls << " under " << policy << ":\n"
                                   << [&] {
                                        std::string d;
                                        for (const auto& line : run.result.details) d += "  " + line + "\n";
                                        return d;
                                      }();
  EXPECT_GT(run.result.seconds, 0.0);
}

// An array accessed in pieces gets blocks as large as a piece allows, never one spanning two
// members' pieces (FT's rows of 512 KiB: 64 KiB blocks; a 32 KiB piece: 32 KiB blocks).
TEST(LoomTeam, BlocksFollowThePieces) {
  EXPECT_EQ(nas::block_for_piece(0), 4096u);
  EXPECT_EQ(nas::block_for_piece(512 * 1024), 65536u);
  EXPECT_EQ(nas::block_for_piece(32 * 1024), 32768u);
  EXPECT_EQ(nas::block_for_piece(3 * 16384), 16384u);  // the largest power of two dividing it
  EXPECT_EQ(nas::block_for_piece(256 * 16), 4096u);
  EXPECT_EQ(nas::block_for_piece(24), 4096u);  // pieces smaller than a page share blocks
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" + std::get<2>(info.param);
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Nas, Kernels,
                         ::testing::Combine(::testing::Values("ep", "cg", "is", "mg", "ft"), ::testing::Values('S', 'W'),
                                            ::testing::Values("floating-ts", "floating-dir", "fixed-ts", "fixed-dir")),
                         param_name);
// BT, the application (200 steps at W, each a transpose of the grid): class S under every
// policy, W under the default one.
INSTANTIATE_TEST_SUITE_P(NasBt, Kernels,
                         ::testing::Combine(::testing::Values("bt"), ::testing::Values('S'),
                                            ::testing::Values("floating-ts", "floating-dir", "fixed-ts", "fixed-dir")),
                         param_name);
INSTANTIATE_TEST_SUITE_P(NasBtW, Kernels, ::testing::Combine(::testing::Values("bt"), ::testing::Values('W'), ::testing::Values("floating-ts")),
                         param_name);

}  // namespace
}  // namespace loom::test
