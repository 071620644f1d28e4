#pragma once
// The `owner-invoked` tree policy (Seriema's case study; docs/mcts.md): every node has an owner,
// a worker thread of some process, found from the node's id (ids are hashes of the path from
// the root, so a parent names its children without asking anyone). A rollout descends through
// the nodes its worker owns and continues at a child's owner by a call carrying the rollout
// (the position and the path so far); the worker where it stops evaluates it and sends each
// owner on the path one call with the result for its edges. Calls go through each worker's
// Aggregator, whose records go out when the worker is about to wait, is about to evaluate a
// leaf (the calls made before it), or has evaluated one (its results). The root's owner (rank
// 0's first worker) starts every rollout and keeps up to `in_flight` per worker of the job
// travelling; while fewer than half of those are out, it hands the evaluation of a leaf of its
// own to another worker. Workers wait for calls by spinning and yielding, never sleeping, while
// a search runs: a call is always on its way. The search is attached to the objects::Context,
// and every call names it by its id there.
//
// Under `--owner random-at-expansion` (Seriema's own protocol) a node's owner is instead chosen
// at random when an edge's child becomes a node: the parent's owner sends the chosen worker a
// create-child call with the child's position, and that worker makes the node and tells the
// parent's owner its id (which names the owner) by a call. Rollouts that select the edge
// meanwhile wait at the parent (deferred selections) and go on to the child when the parent
// learns of it. A leaf is evaluated by a thread of its owner's process chosen at random, through
// that thread's simulation queue.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "loom/dsm/common/backoff.hpp"
#include "loom/invoke/aggregator.hpp"
#include "loom/mcts_shared_tree/invoked_worker.hpp"
#include "loom/mcts_shared_tree/local_tree.hpp"
#include "loom/mcts_shared_tree/rollout_wire.hpp"
#include "loom/mcts_shared_tree/search.hpp"
#include "loom/objects/context.hpp"

namespace loom::mcts {

namespace invoked {

inline uint64_t child_id(uint64_t parent, uint16_t move) {
  uint64_t h = parent ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(move) + 1));
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

}  // namespace invoked

template <typename G>
class InvokedSearch final : public Search<G> {
  using State = typename G::State;
  using Step = invoked::Step;
  using Result = invoked::Result;
  using Header = invoked::RolloutHeader;  // the messages: rollout_wire.hpp

 public:
  // Collective (the search is attached to the Context, in the same order everywhere).
  InvokedSearch(const G& g, SearchConfig cfg, objects::Context& ctx)
      : Search<G>(g),
        g_(g),
        cfg_(cfg),
        ctx_(ctx),
        inv_(ctx.invoker()),
        workers_(static_cast<size_t>(inv_.threads())),
        pool_(inv_.threads(), [&rt = ctx.runtime()](int t, std::function<void()> body) { return rt.spawn_at(t, "mcts-worker", std::move(body)); }) {
    if (inv_.config().helpers != 0) fail("mcts: the owner-invoked policy runs calls on the owners' own threads (LOOM_INVOKE_HELPERS=0)");
    id_ = ctx.attach(this, typeid(InvokedSearch));
  }
  // A call that arrives later finds no object and is dropped.
  ~InvokedSearch() override { ctx_.detach(id_); }

  // Collective; every worker thread of every process runs its part (rank 0's first worker
  // starts the rollouts, the others serve).
  SearchResult search(const State& position, Budget budget) override {
    const auto t0 = std::chrono::steady_clock::now();
    root_state_ = position;
    root_id_ = random_owners() ? 0 : g_.hash(position);  // random-at-expansion: worker 0's node 0
    epoch_ = ++searches_;
    for (auto& w : workers_) {
      const uint64_t seed = cfg_.seed * 131 + static_cast<uint64_t>(ctx_.rank()) * 17 + static_cast<uint64_t>(&w - &workers_[0]);
      if (!w) w = std::make_unique<Worker>();
      w->reset(seed, inv_.gid(invoke::Thread{ctx_.rank(), static_cast<int>(&w - &workers_[0])}));
    }
    ++cfg_.seed;
    ctx_.process_barrier();
    pool_.run([&](int t) {
      if (t == 0 && ctx_.rank() == 0) drive(budget);
      else serve(t);
    });
    ctx_.process_barrier();
    inv_.poll();  // results sent before their senders arrived (they matter to no one now)
    RolloutCounters rc;
    for (auto& w : workers_) rc.add(w->rc);
    rc.worker_cpu_ns = pool_.last_run_cpu_ns();
    return finish(rc, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

 private:
  using Scratch = invoked::Scratch;
  using Worker = invoked::Worker;
  using StepScratch = invoked::StepScratch;

  // Records (RDMA WRITEs of aggregated calls) this thread has sent so far.
  uint64_t records_sent() {
    uint64_t n = 0;
    for (const auto& m : inv_.messengers().all())
      if (m) n += m->records();
    return n;
  }

  bool random_owners() const { return cfg_.owner == OwnerProtocol::RandomAtExpansion; }
  // The owner of node `id`: under random-at-expansion its high bits, else its hash's residue.
  int gid_of(uint64_t id) const {
    return random_owners() ? static_cast<int>(id >> kOwnerShift) : static_cast<int>(id % static_cast<uint64_t>(inv_.total_threads()));
  }
  Worker& me() { return *workers_[static_cast<size_t>(inv_.self().index)]; }
  Worker& aggregated() {
    Worker& w = me();
    if (!w.agg) {
      invoke::Aggregator::Config c;
      c.mode = cfg_.aggregation == Aggregation::Ovfl ? invoke::Mode::Ovfl : invoke::Mode::Trad;
      w.agg = std::make_unique<invoke::Aggregator>(c);
    }
    return w;
  }
  // The Aggregator's figures for this search (its peaks reset when the worker began it).
  void count_aggregation(Worker& w, uint64_t kept_before) {
    w.rc.kept_calls = w.agg->exceeded_calls() - kept_before;
    for (int g = 0; g < inv_.total_threads(); ++g) {
      if (!w.agg->called(g)) continue;
      ++w.rc.pairs_called;
      if (w.agg->peak_kept_bytes(g) > 4096) ++w.rc.pairs_kept_over_4k;
    }
  }

  uint8_t* node_at(Worker& w, uint64_t id, const State& s) {
    auto [it, fresh] = w.nodes.try_emplace(id, nullptr);
    if (fresh) {
      uint16_t legal[1024];
      const int n = g_.winner(s) >= 0 ? 0 : g_.legal_moves(s, legal);
      it->second = w.arena.allocate(NodeLayout::bytes(n));
      NodeLayout::make(it->second, n, legal);
    }
    return it->second;
  }

  // The root's owner: starts rollouts while the budget lasts, keeping `in_flight` travelling;
  // then waits for the last, and tells every worker the search is over.
  void drive(Budget b) {
    Worker& w = aggregated();
    const uint64_t records = records_sent(), kept = w.agg->exceeded_calls();
    w.agg->reset_peaks();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(b.seconds > 0 ? b.seconds : 1e9);
    uint64_t started = 0;
    // A short search keeps fewer travelling (a 256th of the rollouts its budget stands for,
    // one per worker at least): each one in flight is a virtual loss the others' selections
    // see (bench/README.md, "Measurements behind constants in the code").
    const uint64_t workers = static_cast<uint64_t>(inv_.total_threads());
    uint64_t travelling = static_cast<uint64_t>(cfg_.in_flight) * workers;
    if (const uint64_t expected = expected_rollouts(b, rate_); expected != 0)
      travelling = std::clamp<uint64_t>(expected / 256, workers, travelling);
    travelling_ = travelling;
    wait::Backoff backoff(kYields);
    ProgressClock clock(static_cast<bool>(this->progress_));
    // Whether the budget allows another rollout (the clock read every 8th): asked before each
    // start, since a rollout that never leaves this worker (one process) is over at once.
    auto more_allowed = [&] {
      if (b.rollouts != 0) return started < b.rollouts;
      return (started & 7) != 0 || std::chrono::steady_clock::now() < deadline;
    };
    for (bool more = true; more || in_flight_ != 0;) {
      if (clock.due()) this->progress_(Progress{clock.seconds(), started - in_flight_, w.rc.max_depth, root_edges()});
      bool worked = false;
      while (more && in_flight_ < travelling) {
        if (!more_allowed()) {
          more = false;
          break;
        }
        ++started, ++in_flight_, worked = true;
        {
          const StepScratch sc(w);
          (*sc).path.clear();
          descend(w, *sc, root_id_, root_state_);
        }
        // The others' calls run between starts, not only once the starts reach their bound: a
        // start that ends here is evaluated here at once, and a run of them left the rollouts
        // that had come back to this worker's nodes, and so the other workers, waiting.
        inv_.poll();
      }
      // progress(), not poll(): it also sends the calls this thread queued when a ring was full
      // (a call made inside a call queues rather than waits), which poll() left queued: with
      // small rings (LOOM_INVOKE_CHUNK_SIZE=4K, LOOM_INVOKE_MAX_CHUNKS=2) a search hung.
      worked |= inv_.progress() > 0;
      worked |= run_simulations(w);
      w.agg->flush();
      if (worked) backoff.reset();
      else backoff.pause();
    }
    for (int g = 0; g < inv_.total_threads(); ++g)
      if (g != w.gid) w.agg->call(inv_.thread_of(g), [id = id_] {
        if (const auto p = objects::Context::try_pin<InvokedSearch>(id); p.get() != nullptr) p.get()->me().done = true;
      });
    w.agg->flush();
    w.rc.messages = records_sent() - records;
    count_aggregation(w, kept);
  }

  void serve(int index) {
    (void)index;
    Worker& w = aggregated();
    const uint64_t records = records_sent(), kept = w.agg->exceeded_calls();
    w.agg->reset_peaks();
    wait::Backoff backoff(kYields);
    // Each worker waits for its own end-of-search call: with a flag per process, a worker that
    // saw another's call left its own in its channel, and it ended the next search at once
    // (the rollouts sent to that worker then never came back: two threads per process hung).
    while (!w.done) {
      const int n = inv_.progress();  // as in drive(): the calls queued for a full ring go too
      const bool simulated = run_simulations(w);
      w.agg->flush();
      if (n > 0 || simulated) backoff.reset();
      else backoff.pause();
    }
    w.rc.messages = records_sent() - records;
    count_aggregation(w, kept);
  }

  // At node `id` (this worker's): select an edge with virtual loss; go on here, at the child's
  // owner, or stop and evaluate.
  void descend(Worker& w, Scratch& sc, uint64_t id, State s) {
    std::vector<Step>& path = sc.path;
    for (;;) {
      // Under random-at-expansion a node exists before a rollout can name it (its creation
      // told its parent); only the root is made on the first visit.
      uint8_t* node = random_owners() && (id != root_id_ || w.gid != 0) ? find_node(w, id) : node_at(w, id, s);
      if (node == nullptr) return;  // no node of this search here (an id from the wire)
      const int n = static_cast<int>(NodeLayout::edges(node));
      uint64_t* st = NodeLayout::stats(node);
      const uint64_t* am = NodeLayout::amaf(node);
      auto stats_of = [&](int e) { return EdgeStats::of(st[e]); };
      auto amaf_of = [&](int e) { return EdgeStats::of(am[e]); };
      const int i = n == 0              ? -1
                    : cfg_.rave != 0 ? select_edge_rave(n, stats_of, amaf_of, cfg_.exploration, cfg_.rave, w.rng)
                                     : select_edge(n, stats_of, cfg_.exploration, w.rng);
      if (i < 0) return evaluate_here_or_queue(w, sc, s);
      w.rc.edges_read += static_cast<uint64_t>(n);
      const uint32_t k = cfg_.playouts, vl = cfg_.virtual_loss * k;
      if (NodeLayout::in_flight(node)[i]++ != 0) ++w.rc.vl_collisions;
      const uint32_t visits_before = EdgeStats::of(st[i]).visits;
      st[i] += EdgeStats::word(vl, 0);
      const uint16_t move = NodeLayout::moves(node)[i];
      path.push_back(Step{id, static_cast<uint32_t>(w.gid), static_cast<uint16_t>(i), static_cast<uint8_t>(g_.to_move(s)), 0});
      g_.play(s, move);
      if (visits_before < cfg_.expand_at * k) {
        // The root's owner selects at the root for every rollout: while fewer than half the
        // rollouts it may keep travelling are out, the others are short of work, and a leaf of
        // its own is evaluated by one of them.
        if (!random_owners() && w.gid == 0 && inv_.total_threads() > 1 && in_flight_ * 2 < travelling_) return forward_evaluation(w, sc, s);
        return evaluate_here_or_queue(w, sc, s);
      }
      const uint64_t child = random_owners() ? child_or_defer(w, sc, node, id, i, s) : invoked::child_id(id, move);
      if (child == 0) return;  // deferred at this node until its child exists
      if (gid_of(child) != w.gid) return forward(w, sc, child, s);
      id = child;
    }
  }

  // A rollout on the wire (rollout_wire.hpp), in sc.msg.
  void pack_rollout(Worker& w, Scratch& sc, uint64_t node, const State& s) {
    pack_rollout_into(sc.msg, sc, node, s);
    ++w.rc.remote_calls;
    w.rc.bytes += sc.msg.size();
  }
  void pack_rollout_into(std::vector<std::byte>& msg, const Scratch& sc, uint64_t node, const State& s) const {
    invoked::pack_rollout(msg, Header{id_, epoch_, node, static_cast<uint32_t>(sc.path.size()), 0}, s, std::span<const Step>(sc.path));
  }
  // False for a message that is not a whole, valid rollout of this search.
  bool unpack_rollout(std::span<std::byte> b, Header& h, State& s, std::vector<Step>& path) const {
    return invoked::unpack_rollout(g_, b, wire_check(), h, s, path);
  }
  invoked::WireCheck wire_check() const { return invoked::WireCheck{epoch_, static_cast<uint32_t>(inv_.total_threads())}; }

  void forward(Worker& w, Scratch& sc, uint64_t child, const State& s) {
    pack_rollout(w, sc, child, s);
    w.agg->call_buffer(inv_.thread_of(gid_of(child)), [](std::span<std::byte> b) { deliver<&InvokedSearch::on_descend>(b); }, sc.msg);
  }
  void on_descend(std::span<std::byte> b) {
    Header h;
    State s;
    Worker& w = aggregated();
    const StepScratch sc(w);
    if (unpack_rollout(b, h, s, (*sc).path)) descend(w, *sc, h.node, s);
  }

  // random-at-expansion (the class comment): ids are [owner | count at the owner].
  static constexpr int kOwnerShift = 40;
  static constexpr uint64_t kCreating = ~uint64_t{0};  // a child slot while its create-child call is out

  static uint8_t* find_node(Worker& w, uint64_t id) {
    const auto it = w.nodes.find(id);
    return it == w.nodes.end() ? nullptr : it->second;
  }
  uint64_t create_node(Worker& w, const State& s) {
    const uint64_t id = static_cast<uint64_t>(w.gid) << kOwnerShift | ++w.created;
    node_at(w, id, s);
    return id;
  }

  // Edge i's child of node `id` (this worker's), the rollout at `s` below it; 0 when the rollout
  // waits here for the child instead: the first to find no child picks its owner at random (this
  // worker makes it at once), the rest wait for the create-child call's answer.
  uint64_t child_or_defer(Worker& w, Scratch& sc, uint8_t* node, uint64_t id, int i, const State& s) {
    uint64_t& child = NodeLayout::children(node)[i];
    if (child != 0 && child != kCreating) return child;
    if (child == 0) {
      const int owner = static_cast<int>(w.rng.below(static_cast<uint32_t>(inv_.total_threads())));
      if (owner == w.gid) return child = create_node(w, s);
      child = kCreating;
      invoked::pack_create(sc.msg, invoked::CreateHeader{id_, epoch_, id, static_cast<uint32_t>(w.gid), static_cast<uint16_t>(i), 0}, s);
      w.agg->call_buffer(inv_.thread_of(owner), [](std::span<std::byte> b) { deliver<&InvokedSearch::on_create>(b); }, sc.msg);
      ++w.rc.creations, ++w.rc.remote_calls;
      w.rc.bytes += sc.msg.size();
    }
    ++w.rc.deferred;
    auto& waiting = w.deferred[{id, static_cast<uint16_t>(i)}];
    waiting.emplace_back();
    pack_rollout_into(waiting.back(), sc, 0, s);
    return 0;
  }

  void on_create(std::span<std::byte> b) {
    invoked::CreateHeader h;
    State s;
    Worker& w = aggregated();
    if (!invoked::unpack_create(g_, b, wire_check(), h, s)) return;
    const uint64_t child = create_node(w, s);
    w.agg->call(inv_.thread_of(static_cast<int>(h.parent_owner)), [obj = id_, epoch = h.epoch, parent = h.parent, edge = h.edge, child] {
      if (const auto p = objects::Context::try_pin<InvokedSearch>(obj); p.get() != nullptr) p.get()->on_created(epoch, parent, edge, child);
    });
  }

  // The parent learns its child: the slot takes the child's id, and the rollouts deferred at
  // the edge go on there (here, or by call at the child's owner).
  void on_created(uint32_t epoch, uint64_t parent, uint16_t edge, uint64_t child) {
    Worker& w = aggregated();
    uint8_t* node = find_node(w, parent);
    const bool made = (child & ((uint64_t{1} << kOwnerShift) - 1)) != 0 && gid_of(child) < inv_.total_threads();  // a count, an owner
    if (epoch != epoch_ || node == nullptr || edge >= NodeLayout::edges(node) || !made) return;
    if (NodeLayout::children(node)[edge] != kCreating) return;  // not a creation this worker asked for
    NodeLayout::children(node)[edge] = child;
    const auto it = w.deferred.find({parent, edge});
    if (it == w.deferred.end()) return;
    std::vector<std::vector<std::byte>> waiting = std::move(it->second);
    w.deferred.erase(it);
    for (std::vector<std::byte>& msg : waiting) {
      std::memcpy(msg.data() + offsetof(Header, node), &child, sizeof child);
      if (gid_of(child) != w.gid) {
        ++w.rc.remote_calls, w.rc.bytes += msg.size();
        w.agg->call_buffer(inv_.thread_of(gid_of(child)), [](std::span<std::byte> b) { deliver<&InvokedSearch::on_descend>(b); }, msg);
        continue;
      }
      Header h;
      State s;
      const StepScratch sc(w);
      if (unpack_rollout(msg, h, s, (*sc).path)) descend(w, *sc, child, s);
    }
  }

  // A leaf's evaluation: here, or under random-at-expansion by a thread of this process chosen
  // at random (pushed to its simulation queue).
  void evaluate_here_or_queue(Worker& w, Scratch& sc, const State& s) {
    const int local = inv_.threads();
    const int t = random_owners() && local > 1 ? static_cast<int>(w.rng.below(static_cast<uint32_t>(local))) : inv_.self().index;
    if (t == inv_.self().index) return evaluate_and_report(w, sc, s);
    std::vector<std::byte> msg;
    pack_rollout_into(msg, sc, 0, s);
    workers_[static_cast<size_t>(t)]->simulations.push(std::move(msg));
  }
  // Evaluates the leaves queued for this thread; whether there were any.
  bool run_simulations(Worker& w) {
    bool any = false;
    for (std::vector<std::byte> msg; w.simulations.try_pop(msg);) {
      any = true;
      Header h;
      State s;
      const StepScratch sc(w);
      if (unpack_rollout(msg, h, s, (*sc).path)) evaluate_and_report(w, *sc, s);
    }
    return any;
  }

  // A leaf's evaluation at another worker, chosen at random (its results come back by call).
  void forward_evaluation(Worker& w, Scratch& sc, const State& s) {
    pack_rollout(w, sc, 0, s);
    const int to = 1 + static_cast<int>(w.rng.next() % static_cast<uint64_t>(inv_.total_threads() - 1));
    w.agg->call_buffer(inv_.thread_of(to), [](std::span<std::byte> b) { deliver<&InvokedSearch::on_evaluate>(b); }, sc.msg);
  }
  void on_evaluate(std::span<std::byte> b) {
    Header h;
    State s;
    Worker& w = aggregated();
    const StepScratch sc(w);
    if (unpack_rollout(b, h, s, (*sc).path)) evaluate_and_report(w, *sc, s);
  }

  // K playouts here; each owner on the path gets the results for its edges in one call.
  void evaluate_and_report(Worker& w, Scratch& sc, const State& s) {
    const std::vector<Step>& path = sc.path;
    // Calls made before this evaluation (rollouts started or forwarded in the same round of
    // starts or of polled calls) go out before its playouts, not after them.
    w.agg->flush();
    const uint32_t k = cfg_.playouts;
    const int over = g_.winner(s);
    const uint32_t black = evaluate(w, sc, s, over);
    ++w.rc.rollouts;
    w.rc.playouts += over >= 0 ? 0 : k;
    w.rc.depth_sum += path.size();
    w.rc.max_depth = std::max<uint64_t>(w.rc.max_depth, path.size());
    auto& results = sc.results;
    results.clear();
    for (size_t d = 0; d < path.size(); ++d)
      results.push_back({path[d].owner, Result{path[d].node, path[d].mover == 0 ? black : k - black, path[d].edge, d == 0 ? uint8_t{1} : uint8_t{0}, path[d].mover}});
    std::stable_sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    auto& batch = sc.batch;
    for (size_t i = 0; i < results.size();) {
      const uint32_t owner = results[i].first;
      batch.clear();
      for (; i < results.size() && results[i].first == owner; ++i) batch.push_back(results[i].second);
      const AmafCounts* amaf = cfg_.rave != 0 ? &sc.amaf : nullptr;
      if (static_cast<int>(owner) == w.gid) {
        apply(w, batch, amaf);
        continue;
      }
      if (amaf != nullptr) invoked::pack_results_amaf(sc.msg, id_, epoch_, std::span<const Result>(batch), *amaf);
      else invoked::pack_results(sc.msg, id_, epoch_, std::span<const Result>(batch));
      w.agg->call_buffer(inv_.thread_of(static_cast<int>(owner)), [](std::span<std::byte> b) { deliver<&InvokedSearch::on_results>(b); }, sc.msg);
      ++w.rc.remote_calls;
      w.rc.bytes += sc.msg.size();
    }
    // The results go now, not with the calls of the next evaluations: the rollout's starter
    // keeps only a few travelling and starts the next when this one is back. Held for the
    // calls that poll() runs after this one, they had kept the two sides taking turns
    // (bench/README.md, "Measurements behind constants in the code").
    w.agg->flush();
  }

  void on_results(std::span<std::byte> b) {
    Worker& w = me();
    const StepScratch sc(w);
    if (cfg_.rave == 0) {
      if (invoked::unpack_results(b, wire_check(), (*sc).received)) apply(w, (*sc).received, nullptr);
    } else if (invoked::unpack_results_amaf(b, wire_check(), static_cast<uint32_t>(g_.max_moves()), (*sc).received, (*sc).received_amaf)) {
      apply(w, (*sc).received, &(*sc).received_amaf);
    }
  }

  // Black's wins of K playouts from `s` (`over`: its winner, or -1), with AMAF counts into the
  // step's scratch under RAVE.
  uint32_t evaluate(Worker& w, Scratch& sc, const State& s, int over) {
    return evaluate_leaf(g_, s, over, cfg_.playouts, cfg_.rave, w.rng, sc.amaf);
  }

  // A call's message begins with its search object's id: the call runs on that object, pinned
  // while it runs, if it is still there (a call from the wire names any id; no object, no call).
  template <void (InvokedSearch::*On)(std::span<std::byte>)>
  static void deliver(std::span<std::byte> b) {
    uint32_t id = 0;
    if (!invoked::object_of(b, id)) return;
    if (const auto p = objects::Context::try_pin<InvokedSearch>(id); p.get() != nullptr) (p.get()->*On)(b);
  }

  // An edge's result replaces its virtual loss; the root's ends the rollout. Under RAVE the
  // leaf's AMAF counts go to every edge of each node named.
  void apply(Worker& w, const std::vector<Result>& rs, const AmafCounts* amaf) {
    const uint32_t k = cfg_.playouts, vl = cfg_.virtual_loss * k;
    for (const Result& r : rs) {
      auto it = w.nodes.find(r.node);
      if (it == w.nodes.end() || r.edge >= NodeLayout::edges(it->second)) continue;  // not this search's
      NodeLayout::stats(it->second)[r.edge] += (static_cast<uint64_t>(static_cast<int64_t>(k) - static_cast<int64_t>(vl)) << 32) + r.wins;
      --NodeLayout::in_flight(it->second)[r.edge];
      if (amaf != nullptr) add_amaf(it->second, r.mover, *amaf, [](uint64_t& word, uint64_t delta) { word += delta; });
      if (r.root) --in_flight_;
    }
  }

  // The root's edges, at rank 0's first worker (their owner).
  std::vector<RootEdge> root_edges() {
    std::vector<RootEdge> root;
    auto it = workers_[0]->nodes.find(root_id_);
    if (it == workers_[0]->nodes.end()) return root;
    uint8_t* node = it->second;
    for (uint32_t i = 0; i < NodeLayout::edges(node); ++i) {
      const EdgeStats e = EdgeStats::of(NodeLayout::stats(node)[i]);
      root.push_back(RootEdge{NodeLayout::moves(node)[i], e.visits, e.wins});
    }
    return root;
  }

  // The root's edges (at rank 0's first worker) for everyone.
  SearchResult finish(RolloutCounters rc, double seconds) {
    std::vector<RootEdge> root = ctx_.rank() == 0 ? root_edges() : std::vector<RootEdge>{};
    const auto all = ctx_.runtime().bootstrap().allgather(std::as_bytes(std::span<const RootEdge>(root)));
    root.resize(all[0].size() / sizeof(RootEdge));
    if (!all[0].empty()) std::memcpy(root.data(), all[0].data(), all[0].size());
    RolloutCounters total;
    for (const RolloutCounters& c : ctx_.runtime().bootstrap().allgather_value(rc)) total.add(c);
    rate_ = seconds > 0 ? static_cast<double>(total.rollouts) / seconds : 0;
    return summarize(std::move(root), total, seconds);
  }

  static constexpr uint32_t kYields = 1u << 20;  // a wait during a search yields, not sleeps
  const G& g_;
  SearchConfig cfg_;
  objects::Context& ctx_;
  invoke::Invoker& inv_;
  std::vector<std::unique_ptr<Worker>> workers_;
  WorkerPool pool_;  // the invoker's threads 1.. of this process
  State root_state_{};
  uint64_t root_id_ = 0;
  uint64_t in_flight_ = 0;  // the root owner's
  uint64_t travelling_ = 0;  // the root owner's bound on in_flight_ this search
  uint32_t epoch_ = 0;      // changed only between searches (collectively)
  double rate_ = 0;         // the last search's rollouts per second (the whole job's)
  uint32_t id_ = 0;         // this search object's id at the Context
  // Searches of every InvokedSearch in this process so far: every process runs the same
  // searches in the same order, so the count names a search alike everywhere, and a late call
  // from an earlier search object never passes for the current one's.
  static inline uint32_t searches_ = 0;
};

}  // namespace loom::mcts
