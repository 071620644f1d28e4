#pragma once
// Coherence tests run once per policy: a TEST_P over this fixture gets a fresh Space of its
// policy (collective: made in SetUp, destroyed in TearDown by every rank). Each instance is
// named for its policy (Policies/Coherence.Litmus/fixed_dir), so a failure names it and
// --gtest_filter='*fixed_dir' runs one policy.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "loom/coherence/space.hpp"
#include "tests/mp_test.hpp"

namespace loom::coherence {
// How gtest prints a policy parameter.
inline void PrintTo(const Policy& p, std::ostream* os) { *os << p.name(); }
}  // namespace loom::coherence

namespace loom::test {

inline std::vector<coherence::Policy> all_policies() {
  std::vector<coherence::Policy> out;
  for (auto name : {"floating-ts", "floating-dir", "fixed-ts", "fixed-dir"}) out.push_back(coherence::Policy::parse(name));
  return out;
}

inline coherence::Config config_for(const coherence::Policy& p) {
  coherence::Config c = coherence::Config::from_env();
  c.policy = p;
  c.reserve = size_t{1} << 30;
  return c;
}

inline std::string policy_test_name(const ::testing::TestParamInfo<coherence::Policy>& info) {
  std::string n = info.param.name();
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

class PerPolicy : public ::testing::TestWithParam<coherence::Policy> {
 protected:
  void SetUp() override { space_.emplace(rt(), config_for(GetParam())); }
  void TearDown() override { space_.reset(); }
  coherence::Space& space() { return *space_; }

 private:
  std::optional<coherence::Space> space_;
};

}  // namespace loom::test

#define LOOM_FOR_EACH_POLICY(Suite) \
  INSTANTIATE_TEST_SUITE_P(Policies, Suite, ::testing::ValuesIn(loom::test::all_policies()), loom::test::policy_test_name)
