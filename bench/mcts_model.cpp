#include "bench/mcts_model.hpp"

#include <cstdio>
#include <fstream>
#include <random>

#include "loom/objects/context.hpp"

namespace loom::bench {

namespace {

using mcts::TreePolicy;

// The sum of `stripes` words of an edge, as CachedNodes::refresh reads them (stripes an edge
// capacity apart), over nodes of `edges` edges at random places among the first `used` edges:
// microseconds per word.
double stripe_word_us(size_t stripes) {
  constexpr size_t kCapacity = size_t{1} << 20, kUsed = size_t{1} << 16, kEdges = 120, kNodes = 20000;
  std::vector<uint64_t> words(stripes * kCapacity, 1);
  std::mt19937_64 rng(7);
  uint64_t sink = 0;
  const auto t0 = clk::now();
  for (size_t n = 0; n < kNodes; ++n) {
    const size_t first = rng() % (kUsed - kEdges);
    for (size_t e = first; e < first + kEdges; ++e)
      for (size_t p = 0; p < stripes; ++p) sink += words[p * kCapacity + e];
  }
  const double us = seconds_since(t0) * 1e6 / static_cast<double>(kNodes * kEdges * stripes);
  if (sink == 42) std::printf(" ");
  return us;
}

// A block's READ across the wire beyond an 8-byte one's, per byte (0 without a wire).
double wire_byte_us(objects::Context& ctx, int peer, size_t block) {
  if (peer == 0) return 0;
  objects::Endpoint& ep = ctx.endpoint();
  const objects::GlobalPtr<std::byte> b = ep.allocate<std::byte>(peer, block);
  std::vector<std::byte> out(block);
  auto us_per_read = [&](size_t n) {
    ep.rget(b, out.data(), n);  // warm
    std::vector<double> t;
    for (int i = 0; i < 50; ++i) {
      const auto t0 = clk::now();
      ep.rget(b, out.data(), n);
      t.push_back(seconds_since(t0) * 1e6);
    }
    return median(t);
  };
  const double word = us_per_read(8), whole = us_per_read(block);
  ep.deallocate(b);
  return std::max(0.0, whole - word) / static_cast<double>(block);
}

std::string variant_of(TreePolicy p, int np, int threads) { return std::string(mcts::name(p)) + "-np" + std::to_string(np) + "-t" + std::to_string(threads); }

mcts::RolloutProfile profile_of(const ModelInputs& in, const std::vector<Row>& rows, const std::string& v, int threads, uint32_t in_flight) {
  mcts::RolloutProfile r;
  r.rollout_us = value_of(rows, "local-np1-t1", "worker_us");
  r.word_us = in.word_us, r.byte_us = in.byte_us;
  r.at = in.layout.scale, r.threads = threads, r.in_flight = in_flight;
  r.edges = value_of(rows, v, "edges_summed");
  r.calls = value_of(rows, v, "remote_calls");
  r.misses = value_of(rows, v, "misses"), r.bytes = value_of(rows, v, "bytes_fetched");
  r.released = value_of(rows, v, "released_blocks");
  r.syncs = value_of(rows, v, "remote_calls");  // a cached-shared search counts its synchronizations there
  if (!v.starts_with("owner-invoked")) r.calls = 0;
  if (!v.starts_with("cached-shared")) r.misses = r.bytes = r.released = r.syncs = 0;
  return r;
}

// The policy's extra_us_fit in another run's CSV (bench_mcts --model --csv).
double extra_us_from(const std::string& path, TreePolicy p) {
  std::ifstream f(path);
  if (!f) fail("bench_mcts: --model-from ", path, ": cannot read it");
  const std::string prefix(mcts::name(p)), metric = ",extra_us_fit,";
  for (std::string line; std::getline(f, line);)
    if (line.starts_with(prefix + "-np") && line.find(metric) != std::string::npos) {
      const size_t at = line.find(metric) + metric.size();
      return std::stod(line.substr(at, line.find(',', at) - at));
    }
  return 0;  // that run did not measure the policy, or the components priced all of it
}

}  // namespace

ModelInputs measure_model_inputs(objects::Context& ctx, size_t block_bytes) {
  ModelInputs in;
  in.layout = objects::job_layout(ctx);
  in.c = objects::measure_placements(ctx, in.layout, 1000);
  if (ctx.rank() == 0) {
    in.word_us = std::max(0.0, (stripe_word_us(8) * 8 - stripe_word_us(1)) / 7);
    in.byte_us = wire_byte_us(ctx, in.layout.wire_peer, block_bytes);
  }
  ctx.barrier();
  return in;
}

void model_rows(const ModelInputs& in, const ModelOptions& o, std::vector<Row>& rows) {
  std::printf("\ncost model (mcts_shared_tree/projection.hpp): word %.4f us, wire byte %.6f us, extra from %s; %d nodes x %d processes\n",
              in.word_us, in.byte_us, o.extra_from.empty() ? "this run" : o.extra_from.c_str(), in.layout.scale.nodes, in.layout.scale.ranks_per_node);
  std::printf("%-24s %11s %11s %6s %6s %10s %9s %6s %6s\n", "variant", "rollouts/s", "model", "ratio", "host", "worker us", "model us", "ratio",
              "extra");
  // Root's measured rate over its model: the share of a core each worker had (root waits for
  // nothing and sends nothing during a search).
  const std::string root = variant_of(TreePolicy::Root, o.np, o.threads);
  const mcts::RolloutProfile root_profile = profile_of(in, rows, root, o.threads, o.in_flight);
  const double root_share = value_of(rows, root, "rollouts_per_s_all") /
                            mcts::rollouts_per_s(root_profile, mcts::rollout_us(in.c, TreePolicy::Root, root_profile));
  // A policy's profile at this run's scale, its extra cost fitted here (to a worker's time a
  // rollout, had it a core: the measured rate over root's share), and the one the model uses.
  struct Modelled {
    mcts::RolloutProfile r;
    double fit = 0, us = 0;
  };
  auto modelled = [&](TreePolicy p) {
    Modelled m;
    const std::string v = variant_of(p, o.np, o.threads);
    m.r = profile_of(in, rows, v, o.threads, o.in_flight);
    const double measured = value_of(rows, v, "rollouts_per_s_all");
    if (measured > 0 && root_share > 0) {
      const double workers = m.r.at.processes() * m.r.threads;
      m.fit = mcts::fit_extra_us(in.c, p, m.r, workers * 1e6 / (measured / root_share));
    }
    m.r.extra_us = o.extra_from.empty() ? m.fit : extra_us_from(o.extra_from, p);
    m.us = mcts::rollout_us(in.c, p, m.r);
    return m;
  };
  std::vector<Row> out;
  for (TreePolicy p : o.policies) {
    const std::string v = variant_of(p, o.np, o.threads);
    const Modelled m = modelled(p);
    const mcts::RolloutProfile& r = m.r;
    const double us = m.us;
    out.push_back({v, o.board, "extra_us_fit", m.fit, "us"});
    const double model = mcts::rollouts_per_s(r, us), measured = value_of(rows, v, "rollouts_per_s_all"), worker_us = value_of(rows, v, "worker_us");
    const double host = root_share > 0 ? measured / model / root_share : 0;
    out.push_back({v, o.board, "model_rollouts_per_s", model, "1/s"});
    out.push_back({v, o.board, "over_model", measured / model, "x"});
    out.push_back({v, o.board, "over_model_host", host, "x"});
    out.push_back({v, o.board, "model_us", us, "us"});
    out.push_back({v, o.board, "cpu_over_model", worker_us > 0 ? us / worker_us : 0, "x"});
    std::printf("%-24s %11.0f %11.0f %6.2f %6.2f %10.2f %9.2f %6.2f %6.2f\n", v.c_str(), measured, model, measured / model, host, worker_us, us,
                worker_us > 0 ? us / worker_us : 0, r.extra_us);
    if (in.layout.scale.nodes < 2) continue;  // no wire's components to carry it with
    // The projection: this run's counts carried to each node count, as many processes a node.
    std::printf("  projection, rollouts/s at nodes 2..64:");
    for (int nodes = 2; nodes <= 64; nodes *= 2) {
      const mcts::RolloutProfile at = mcts::at_scale(r, objects::Scale{nodes, in.layout.scale.ranks_per_node});
      const double rate = mcts::rollouts_per_s(at, mcts::rollout_us(in.c, p, at));
      out.push_back({"mcts-model/" + std::string(mcts::name(p)), static_cast<size_t>(nodes), "rollouts_per_s", rate, "1/s"});
      out.push_back({"mcts-model/" + std::string(mcts::name(p)), static_cast<size_t>(nodes), "speedup", rate * r.rollout_us / 1e6, "x"});
      std::printf(" %.3g", rate);
    }
    std::printf("\n");
  }
  rows.insert(rows.end(), out.begin(), out.end());
}

}  // namespace loom::bench
