#include "loom/omp/layer.hpp"

#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <string>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/region/kernel_work.hpp"
#include "loom/omp/adopt_contents.hpp"
#include "loom/omp/program_data.hpp"
#include "loom/omp/settings.hpp"

namespace loom::omp {
namespace {

Layer* g_layer = nullptr;

Schedule schedule_from_env() {
  const char* s = std::getenv("OMP_SCHEDULE");
  return s != nullptr ? parse_schedule(s) : Schedule{};
}

// OMP_CANCELLATION: false (OpenMP's default) is what the layer does; true is refused.
void refuse_cancellation() {
  const char* c = std::getenv("OMP_CANCELLATION");
  if (c == nullptr) return;
  std::string v(c);
  for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (v == "false") return;
  if (v == "true")
    fail("omp: OMP_CANCELLATION=true: the Loom OpenMP layer does not cancel constructs (unset it, or set it to false: "
         "`cancel` is then ignored and every construct runs to its end)");
  fail("omp: OMP_CANCELLATION=", c, " is neither true nor false");
}

}  // namespace

Layer* Layer::find() { return g_layer; }

Layer::Layer(int& argc, char**& argv, bool with_heap) : schedule_(schedule_from_env()) {
  if (g_layer != nullptr) fail("omp: one layer per process");
  refuse_cancellation();
  if (loom::settings::get_bool(settings::kStats)) region::watch_running_siblings(true);
  rt_ = std::make_unique<Runtime>(argc, argv);
  space_ = std::make_unique<coherence::Space>(*rt_);
  stack_bytes_ = (loom::settings::get_size(settings::kStack) + (size_t{2} << 20) - 1) / (size_t{2} << 20) * (size_t{2} << 20);
  stack_mem_ = region::map_at_common_address(rt_->bootstrap(), stack_bytes_, true);
  if (stack_mem_ == nullptr) fail("omp: no range of ", stack_bytes_, " bytes free in every process for the master's stack");
  stack_ = &space_->share_in_place(stack_mem_, stack_bytes_);
  if (with_heap) make_heap();
}

void Layer::share_program() {
  if (team_ != nullptr) fail("omp: the program is shared once");
  if (auto data = program_data()) {
    std::span<uint8_t> globals(reinterpret_cast<uint8_t*>(data->start), data->bytes());
    const size_t replaced = adopt_rank0_contents(rt_->bootstrap(), globals);
    if (replaced > 0) log::debug("omp: ", replaced, " block(s) of globals took rank 0's bytes");
    data_ = &space_->share_in_place(globals.data(), globals.size());
  }
  team_ = std::make_unique<Team>(*space_);
  replace_atomics();
  g_layer = this;
}

void Layer::make_heap() {
  constexpr size_t k2M = size_t{2} << 20;
  heap_bytes_ = (loom::settings::get_size(settings::kHeap) + k2M - 1) / k2M * k2M;
  heap_mem_ = region::map_at_common_address(rt_->bootstrap(), heap_bytes_, true);
  if (heap_mem_ == nullptr) fail("omp: no range of ", heap_bytes_, " bytes free in every process for the shared heap (LOOM_OMP_HEAP)");
  const size_t block = loom::settings::get_size(settings::kHeapBlock);
  heap_region_ = &space_->share_fresh_in_place(heap_mem_, heap_bytes_, block);
  heap_ = new SharedHeap(heap_mem_, heap_bytes_, rt_->rank(), rt_->size(), block);
}

// At 2 processes or more, unless LOOM_OMP_INLINE_ATOMICS=native: every process replaces the
// same instructions (one executable, one layout).
void Layer::replace_atomics() {
  if (rt_->size() < 2 || loom::settings::get_choice(settings::kInlineAtomics) == "native") return;
  const std::vector<PageRange> code = program_code();
  replace_inline_atomics(code, this);
  const std::vector<AtomicSite> left = unsupported_atomics();
  if (rt_->rank() == 0 && !left.empty()) {
    std::fprintf(stderr,
                 "loom-omp: %zu locked instruction(s) in the program are not carried out across processes, the first "
                 "at %#lx (%s); on shared memory they are atomic within a process only (docs/openmp.md)\n",
                 left.size(), static_cast<unsigned long>(left.front().pc), left.front().text.c_str());
  }
}

bool Layer::shared(uintptr_t address) { return space_->address_space().find(reinterpret_cast<const void*>(address)) != nullptr; }
void Layer::lock(uintptr_t address) { team_->atomic_start(address); }
void Layer::unlock(uintptr_t address) { team_->atomic_end(address); }
void Layer::fence() { team_->flush(); }

Layer::~Layer() {
  set_atomic_router(nullptr);
  g_layer = nullptr;
  team_.reset();
  if (loom::settings::get_bool(settings::kStats))
    std::fprintf(stderr, "loom-omp: rank %d: %s\n", rt_->rank(), coherence::stats_line(space_->stats()).c_str());
  if (heap_region_ != nullptr) space_->destroy_region(*heap_region_);
  space_->destroy_region(*stack_);
  if (data_ != nullptr) space_->destroy_region(*data_);
  space_.reset();
  rt_.reset();
}

}  // namespace loom::omp
