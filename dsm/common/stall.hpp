#pragma once
// Waits that make no progress say so: a StallWatch, checked on every round of a wait loop, warns
// once the wait has lasted LOOM_STALL_REPORT_MS (5 s) with what the waiter says it waits for,
// and again every minute while it lasts. It reads the clock once per 64 rounds.
#include <chrono>
#include <cstdint>
#include <string>

#include "loom/dsm/common/log.hpp"

namespace loom::wait {

// LOOM_STALL_REPORT_MS as a duration; zero: never report. Read from the setting by the
// Runtime's construction (read_stall_report_setting), so that a StallWatch made inside a fault
// handler reads a plain word and allocates nothing; 5 s before.
std::chrono::milliseconds stall_report_after();
void read_stall_report_setting();

class StallWatch {
 public:
  StallWatch() : first_(stall_report_after()) {}
  // `describe()` returns the report's text; it runs only when a report is due.
  template <typename Describe>
  void check(Describe&& describe) {
    if ((++rounds_ & 63) != 0 || first_.count() == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (start_ == std::chrono::steady_clock::time_point{}) {
      start_ = now;
      next_ = now + first_;
      return;
    }
    if (now < next_) return;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
    log::warn(describe(), " (waiting for ", waited, " s)");
    next_ = now + std::chrono::minutes(1);
  }
  // The wait made progress: a later stall counts from now.
  void reset() { start_ = {}; }

 private:
  std::chrono::milliseconds first_;
  uint64_t rounds_ = 0;
  std::chrono::steady_clock::time_point start_{};
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace loom::wait
