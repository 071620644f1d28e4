#pragma once
// The fixtures of the objects/ suites: one Endpoint per test (global pointers), or one Context
// per suite with the container's policy as the test parameter (containers).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loom/objects/context.hpp"
#include "loom/objects/endpoint.hpp"
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

// Containers under every policy: Policies/HashMaps.X/onesided, .../invoked, .../cached, .../auto.
class WithContext : public ::testing::TestWithParam<objects::Policy> {
 protected:
  static void SetUpTestSuite() { ctx_ = new objects::Context(rt()); }
  static void TearDownTestSuite() {
    delete ctx_;
    ctx_ = nullptr;
  }
  static objects::Context& ctx() { return *ctx_; }
  static objects::Policy policy() { return GetParam(); }
  static int me() { return rt().rank(); }
  static int np() { return rt().size(); }
  static int threads() { return rt().threads_per_process(); }
  // f(t) on every worker thread of this process (loomrun --threads), t = 0 on this one.
  template <typename F>
  // An exception in any thread ends the process with its text: the other threads may be
  // waiting in a barrier for the one that threw, so nothing could be joined.
  static void on_every_thread(F f) {
    auto run = [&f](int t) {
      try {
        f(t);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "objects test: thread %d of rank %d: %s\n", t, rt().rank(), e.what());
        std::fflush(stderr);
        std::_Exit(1);
      }
    };
    std::vector<std::thread> ts;
    for (int t = 1; t < threads(); ++t) ts.push_back(rt().spawn_at(t, "objects-test-" + std::to_string(t), [&run, t] { run(t); }));
    run(0);
    for (auto& t : ts) t.join();
  }

 private:
  static inline objects::Context* ctx_ = nullptr;
};

inline std::string policy_name(const ::testing::TestParamInfo<objects::Policy>& info) { return std::string(objects::name(info.param)); }

}  // namespace loom::test
