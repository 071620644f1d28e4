// Every process pushes into rank 0's queue at once: each claim meets the others' on the queue's
// tail, which the contended components (fad_single, cas_persistent) price.
#include "bench/objects_contended.hpp"

#include <cstdio>
#include <memory>

#include "loom/objects/queue.hpp"

namespace loom::bench {

using objects::Level;
using objects::Op;
using objects::Policy;

namespace {

// The mean microseconds of a push over every process's `pushes`, all pushing at once.
double mean_push_us(objects::Context& ctx, Level level, int pushes) {
  const size_t cap = static_cast<size_t>(pushes) * static_cast<size_t>(ctx.size()) + 1;
  auto q = std::make_unique<objects::Queue<uint64_t>>(ctx, 0, cap, Policy::OneSided);
  ctx.barrier();
  const auto t0 = clk::now();
  for (int i = 0; i < pushes; ++i)
    if (!q->try_push(static_cast<uint64_t>(i), level)) fail("bench_objects: a contended push found the queue full");
  const double mine = seconds_since(t0) / pushes * 1e6;
  ctx.barrier();  // every push done before the queue goes
  q.reset();
  double sum = 0;
  for (double us : ctx.runtime().bootstrap().allgather_value(mine)) sum += us;
  return sum / ctx.size();
}

}  // namespace

void contended_rows(objects::Context& ctx, const objects::Components& c, int pushes, std::vector<Row>& rows) {
  if (ctx.rank() == 0)
    std::printf("\ncontended queue: every process (%d) pushes into rank 0's queue at once, one-sided (us per push)\n%-12s %9s %9s %12s\n", ctx.size(),
                "level", "measured", "model", "model alone");
  const std::pair<const char*, Level> levels[] = {{"atomic", Level::Atomic}, {"phasal", Level::PhasalPush}};
  for (const auto& [name, level] : levels) {
    const double us = mean_push_us(ctx, level, pushes);
    if (ctx.rank() != 0) continue;
    const double model = objects::predict_contended(c, Op::QueuePush, level), alone = objects::predict(c, Op::QueuePush, Policy::OneSided, level);
    const std::string v = std::string("contended/onesided-") + name;
    const size_t n = static_cast<size_t>(ctx.size());
    rows.push_back({v, n, "us", us, "us"});
    rows.push_back({v, n, "model_us", model, "us"});
    rows.push_back({v, n, "model_alone_us", alone, "us"});
    std::printf("%-12s %9.3f %9.3f %12.3f\n", name, us, model, alone);
  }
}

}  // namespace loom::bench
