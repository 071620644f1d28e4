#include "loom/dsm/common/stall.hpp"

#include <atomic>

#include "loom/dsm/common/dsm_settings.hpp"

namespace loom::wait {

namespace {
std::atomic<int64_t> g_after_ms{5000};
}  // namespace

std::chrono::milliseconds stall_report_after() {
  return std::chrono::milliseconds(g_after_ms.load(std::memory_order_relaxed));
}

void read_stall_report_setting() {
  g_after_ms.store(settings::get_int(settings::dsm::kStallReport), std::memory_order_relaxed);
}

}  // namespace loom::wait
