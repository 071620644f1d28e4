// Figure 6: every process pushes into a queue hosted at the next one, computing between pushes;
// an owner-invoked push runs only when its host polls — while it waits for its own push, or on a
// helper thread — so its latency grows with the host's computing; a one-sided push needs no host.
#include "bench/objects_fig6.hpp"

#include <cstdio>

#include "loom/dsm/common/backoff.hpp"
#include "loom/objects/queue.hpp"

namespace loom::bench {

using objects::Level;
using objects::Op;
using objects::Policy;

namespace {

void compute(int us) {
  const auto end = clk::now() + std::chrono::microseconds(us);
  while (clk::now() < end) wait::cpu_relax();
}

struct Point {
  double us;
  Policy ended_on;
};

// Rank 0's mean push latency, the computing left out.
Point measure(objects::Context& ctx, Policy p, int c, int pushes) {
  std::vector<std::unique_ptr<objects::Queue<uint64_t>>> queues;
  for (int r = 0; r < ctx.size(); ++r) queues.push_back(std::make_unique<objects::Queue<uint64_t>>(ctx, r, static_cast<size_t>(pushes) + 1, p));
  objects::Queue<uint64_t>& mine = *queues[static_cast<size_t>((ctx.rank() + 1) % ctx.size())];
  ctx.barrier();
  double total = 0;
  for (int i = 0; i < pushes; ++i) {
    compute(c);
    const auto t0 = clk::now();
    mine.try_push(static_cast<uint64_t>(i));
    total += seconds_since(t0);
  }
  ctx.barrier();
  const Point pt{total / pushes * 1e6, mine.current(Op::QueuePush, Level::Atomic)};
  queues.clear();
  return pt;
}

}  // namespace

void fig6_rows(objects::Context& ctx, const std::string& label, bool with_others, const Fig6Options& o, std::vector<Row>& rows) {
  std::vector<std::pair<std::string, Policy>> variants{{label, Policy::OwnerInvoked}};
  if (with_others) variants.insert(variants.begin(), {"onesided", Policy::OneSided}), variants.push_back({"auto", Policy::Auto});
  if (ctx.rank() == 0) std::printf("\nFigure 6: queue push latency (us) while every process computes between pushes (%s)\n%-12s", label.c_str(), "compute us");
  if (ctx.rank() == 0)
    for (const auto& v : variants) std::printf(" %12s", v.first.c_str());
  for (int c : o.compute_us) {
    if (ctx.rank() == 0) std::printf("\n%-12d", c);
    for (const auto& [name, p] : variants) {
      const Point pt = measure(ctx, p, c, o.pushes);
      if (ctx.rank() != 0) continue;
      rows.push_back({"fig6/" + name, static_cast<size_t>(c), "us", pt.us, "us"});
      if (p == Policy::Auto) rows.push_back({"fig6/" + name, static_cast<size_t>(c), "ends_invoked", pt.ended_on == Policy::OwnerInvoked ? 1.0 : 0.0, ""});
      std::printf(" %12.3f", pt.us);
      if (p == Policy::Auto) std::printf(" (%s)", std::string(objects::name(pt.ended_on)).c_str());
    }
  }
  if (ctx.rank() == 0) std::printf("\n");
}

}  // namespace loom::bench
