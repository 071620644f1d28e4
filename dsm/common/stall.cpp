#include "loom/dsm/common/stall.hpp"

#include "loom/dsm/common/dsm_settings.hpp"

namespace loom::wait {

std::chrono::milliseconds stall_report_after() {
  static const std::chrono::milliseconds after{settings::get_int(settings::dsm::kStallReport)};
  return after;
}

}  // namespace loom::wait
