#pragma once
// The fixture of the objects/ suites: one Endpoint per test, made and destroyed collectively.
#include <gtest/gtest.h>

#include <optional>

#include "objects/endpoint.hpp"
#include "tests/mp_test.hpp"

namespace loom::test {

class WithEndpoint : public ::testing::Test {
 protected:
  void SetUp() override { ep_.emplace(rt()); }
  void TearDown() override { ep_.reset(); }
  objects::Endpoint& ep() { return *ep_; }
  static int me() { return rt().rank(); }
  static int np() { return rt().size(); }

 private:
  std::optional<objects::Endpoint> ep_;
};

}  // namespace loom::test
