#include "loom/omp/layer.hpp"

#include <cstdlib>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/program_data.hpp"
#include "loom/omp/settings.hpp"

namespace loom::omp {
namespace {

Layer* g_layer = nullptr;

Schedule schedule_from_env() {
  const char* s = std::getenv("OMP_SCHEDULE");
  return s != nullptr ? parse_schedule(s) : Schedule{};
}

}  // namespace

Layer* Layer::find() { return g_layer; }

Layer::Layer(int& argc, char**& argv) : schedule_(schedule_from_env()) {
  if (g_layer != nullptr) fail("omp: one layer per process");
  rt_ = std::make_unique<Runtime>(argc, argv);
  space_ = std::make_unique<coherence::Space>(*rt_);
  // Every process has run the same start-up on the same layout: the globals hold the same bytes
  // (checked by share_in_place, which names a rank that differs).
  if (auto data = program_data()) data_ = &space_->share_in_place(reinterpret_cast<void*>(data->start), data->bytes());
  stack_bytes_ = (loom::settings::get_size(settings::kStack) + (size_t{2} << 20) - 1) / (size_t{2} << 20) * (size_t{2} << 20);
  stack_mem_ = region::map_at_common_address(rt_->bootstrap(), stack_bytes_, true);
  if (stack_mem_ == nullptr) fail("omp: no range of ", stack_bytes_, " bytes free in every process for the master's stack");
  stack_ = &space_->share_in_place(stack_mem_, stack_bytes_);
  team_ = std::make_unique<Team>(*space_);
  g_layer = this;
}

Layer::~Layer() {
  g_layer = nullptr;
  team_.reset();
  space_->destroy_region(*stack_);
  if (data_ != nullptr) space_->destroy_region(*data_);
  space_.reset();
  rt_.reset();
}

}  // namespace loom::omp
