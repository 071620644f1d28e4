// The cost model's components, measured (docs/objects.md, "Cost model"): rank 0 against its peer
// (rank 1, or the first rank across a wire) while the others run their calls in the Context's
// barrier; the contended CAS with everyone.
#include "loom/objects/calibrate.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "loom/invoke/aggregator.hpp"
#include "loom/objects/hash_map.hpp"
#include "loom/objects/queue_ops.hpp"

namespace loom::objects {

namespace {

using clk = std::chrono::steady_clock;

// Median over five rounds of `n` calls of f(i), microseconds per call.
template <typename F>
double us_per(int n, F&& f) {
  std::vector<double> t;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = clk::now();
    for (int i = 0; i < n; ++i) f(i);
    t.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / n);
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

// Rank 0's peer: the first rank it reaches over another transport than its own memory's (across
// a wire or a network: the components a container spread over nodes pays), else rank 1. Rank 0
// alone asks (the transports are as rank 0 sees them).
int other_of(Context& ctx) {
  const fabric::Provider& p = ctx.runtime().provider();
  for (int r = 1; r < ctx.size(); ++r)
    if (p.transport(r) != p.transport(0)) return r;
  return ctx.size() > 1 ? 1 : 0;
}

// A container part's size of buckets (1 MiB or more; 24-byte slots as a HashMap<uint64_t,
// uint64_t>'s), visited in a scattered order one per group of eight (three lines), each group's
// bucket at another place in it: no two visits share a line, and a quarter of the buckets
// straddle two lines, as a table's do. Groups touching a page's first line are left out, so a
// page's one-time fault can be taken before timing.
struct ScatteredBuckets {
  using E = hash::Entry<uint64_t, uint64_t>;
  static constexpr size_t kPage = 4096, kGroup = 8, kGroupBytes = kGroup * sizeof(Slot<E>);
  size_t count;               // buckets
  std::vector<size_t> order;  // one bucket of every eligible group, shuffled
  explicit ScatteredBuckets(size_t visits) : count(kGroup * std::max<size_t>((size_t{1} << 20) / kGroupBytes, 2 * visits)) {
    for (size_t g = 0; g < count / kGroup; ++g)
      if ((g * kGroupBytes) % kPage >= 64 && (g * kGroupBytes) % kPage + kGroupBytes <= kPage) order.push_back(kGroup * g + g % kGroup);
    std::shuffle(order.begin(), order.end(), std::mt19937_64{42});
  }
  size_t bytes() const { return count * sizeof(Slot<E>); }
  size_t at(size_t k) const { return order[k]; }  // k < order.size()
  // The next bucket after k's, from the first again after the last: no division in a timed loop.
  size_t next(size_t& k) const {
    k = k + 1 == order.size() ? 0 : k + 1;
    return order[k];
  }
};

// What a fresh bucket adds: an insert's claim (CAS), its entry written and its publication
// (CAS) behind it, as hash::try_insert_at makes them on a bucket the other process wrote last,
// each bucket once in a scattered order, less the same on one bucket used just before. Each
// round's part (1 MiB, a bucket in every visited group) is written by its owner just before, when
// asked by a call, as an owner makes a container's part. Timed as the insert makes them, the
// three together: CASes alone on cold lines, timed in a loop, overlap the next one's line
// transfer in the core, which an insert (its write and publication waiting on its claim) does
// not (docs/objects.md, "Cost model").
double cold_line_miss(Context& ctx, int other, int n) {
  using E = ScatteredBuckets::E;
  const ScatteredBuckets table(static_cast<size_t>(n) / 2);
  const size_t visits = std::min(static_cast<size_t>(n), table.order.size() - 1);  // order[0] is the warm bucket
  Endpoint& ep = ctx.endpoint();
  const GlobalPtr<Slot<E>> a = ep.allocate<Slot<E>>(other, table.count);
  auto owner_writes_it = [&] {
    invoke::ReturnSlot<uint64_t> done;
    invoke::call_return(invoke::Thread{other, 0}, [a, bytes = table.bytes()] {
      std::memset(a.local(), 0, bytes);
      return uint64_t{1};
    }, done);
    done.get();
  };
  owner_writes_it();
  for (size_t b = 0; b < table.bytes(); b += ScatteredBuckets::kPage)  // this process's one-time page faults
    (void)ep.rget((a.template as<std::byte>() + static_cast<std::ptrdiff_t>(b)).template as<uint64_t>());
  RemoteSlots<E> s(ep, a, GlobalPtr<uint64_t>{});
  // hash::try_insert_at's claim and publication of a bucket holding `seen`; the word it leaves.
  auto insert_at = [&](size_t i, uint64_t seen) {
    const uint64_t busy = hash::word(hash::version_of(seen), hash::kBusy), ready = hash::word(hash::version_of(seen) + 1, hash::kReady);
    if (s.cas(i, seen, busy, Order::Acquire) != seen || s.write_then_cas(i, E{1, 2}, ready, busy, ready, Order::Release) != busy)
      fail("objects: calibration: a bucket changed under its only writer");
    return ready;
  };
  uint64_t warm_word = insert_at(table.at(0), hash::kEmpty);
  const double warm = us_per(n, [&](int) { warm_word = insert_at(table.at(0), warm_word); });
  std::vector<double> cold;
  for (int round = 0; round < 5; ++round) {
    owner_writes_it();
    const auto t0 = clk::now();
    for (size_t k = 1; k <= visits; ++k) insert_at(table.at(k), hash::kEmpty);
    cold.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / static_cast<double>(visits));
  }
  std::sort(cold.begin(), cold.end());
  ep.deallocate(a);
  return std::max(0.0, cold[2] - warm);
}

// Table I: one-sided operations on words at the other process, one at a time; an asynchronous
// one amortized over many in flight.
void fabric_components(Context& ctx, int other, int n, Components& c) {
  Endpoint& ep = ctx.endpoint();
  const GlobalPtr<uint64_t> w = ep.allocate<uint64_t>(other, 64);
  uint64_t sink = 0;
  ep.rput(w, uint64_t{0});
  c.get = us_per(n, [&](int) { sink += ep.rget(w + 1); });
  c.put = us_per(n, [&](int i) { ep.rput(w + 2, static_cast<uint64_t>(i)); });
  c.fad = us_per(n, [&](int) { sink += ep.fetch_add(w + 3, 1); });
  uint64_t seen = ep.atomic_load(w + 4);
  c.cas = us_per(n, [&](int) { seen = ep.compare_swap(w + 4, seen, seen + 1); });
  c.publish_phasal = ep.direct() ? c.put : c.cas;  // as RemoteSlots::ordered_publish chooses
  c.atomic_read = us_per(n, [&](int) { sink += ep.atomic_load(w + 5); });
  c.miss = cold_line_miss(ctx, other, n);
  std::vector<uint64_t> out(static_cast<size_t>(n));
  c.post = us_per(1, [&](int) {
    for (int i = 0; i < n; ++i) ep.rget_async(w + (i % 64), &out[static_cast<size_t>(i)], 1);
    ep.flush();
  }) / n;
  ep.deallocate(w);
  if (sink == 42) c.get += 0;  // keeps the gets
}

std::atomic<uint64_t> g_calls{0};

// The owner's attention: a call_return round trip, and an aggregated call amortized.
void invoke_components(int other, int n, Components& c) {
  const invoke::Thread dest{other, 0};
  // As a container's call: an object id and a key and value travel (32 bytes), a status and a
  // value come back (24 bytes).
  struct Reply {
    uint64_t status, found, value;
  };
  invoke::ReturnSlot<Reply> reply;
  auto one = [&](int i) {
    const uint64_t args[4] = {1, static_cast<uint64_t>(i), 2, 3};
    invoke::call_return(dest, [a0 = args[0], a1 = args[1], a2 = args[2], a3 = args[3]] { return Reply{a0, a1 + a3, a2}; }, reply);
    reply.get();
  };
  for (int i = 0; i < n; ++i) one(i);  // the channel's first chunks, the owner awake
  c.rpc = us_per(n, one);
  invoke::ReturnSlot<uint64_t> slot;
  c.call = us_per(1, [&](int) {
    {
      invoke::Aggregator agg;
      for (int i = 0; i < 8 * n; ++i) agg.call(dest, [] { g_calls.fetch_add(1, std::memory_order_relaxed); });
      agg.flush();
    }
    invoke::call_return(dest, [] { return uint64_t{1}; }, slot);  // runs after them (FIFO)
    slot.get();
  }) / (8 * n);
}

// The operations themselves on local memory in the first-level cache, at each level: a table of
// 512 buckets (12 KiB) each key starting in its own bucket, a fresh insert's bucket emptied again
// behind it; queues walked in order (the next slots prefetched).
void handler_components(int n, Components& c) {
  using HE = hash::Entry<uint64_t, uint64_t>;
  constexpr size_t kPer = 512;
  std::vector<Slot<HE>> buckets(kPer, Slot<HE>{hash::kEmpty, HE{}});
  LocalSlots<HE> hs(buckets.data(), nullptr);
  auto at = [](int i) { return static_cast<size_t>(i) % kPer; };
  c.h_insert = us_per(n, [&](int i) {
    hash::insert(hs, at(i), kPer, static_cast<uint64_t>(at(i)), uint64_t{1});
    buckets[at(i)].word = hash::kEmpty;
  });
  for (size_t k = 0; k < kPer; ++k) hash::insert(hs, k, kPer, static_cast<uint64_t>(k), uint64_t{1});
  auto find = [&](int i, Level l) { return hash::find<LocalSlots<HE>, uint64_t, uint64_t>(hs, at(i), kPer, static_cast<uint64_t>(at(i)), l).value; };
  uint64_t sink = 0;
  c.h_find = us_per(n, [&](int i) { sink += find(i, Level::Atomic); });
  c.h_find_phasal = us_per(n, [&](int i) { sink += find(i, Level::PhasalFind); });
  if (sink == 42) c.h_find += 0;
  const size_t cap = 4 * static_cast<size_t>(n);
  std::vector<Slot<uint64_t>> q(cap);
  uint64_t counters[8] = {};
  auto fresh = [&] {
    for (size_t i = 0; i < cap; ++i) q[i] = Slot<uint64_t>{i, 0};
    std::fill(std::begin(counters), std::end(counters), 0);
  };
  LocalSlots<uint64_t> qs(q.data(), counters);
  uint64_t tail = 0, head = 0;
  fresh();
  c.h_push = us_per(n, [&](int i) { queue::push_atomic(qs, cap, static_cast<uint64_t>(i), tail); });
  c.h_pop = us_per(n, [&](int) { queue::pop_atomic<LocalSlots<uint64_t>, uint64_t>(qs, cap, head); });
  fresh();
  c.h_push_phasal = us_per(n, [&](int i) { queue::push_phasal(qs, cap, static_cast<uint64_t>(i), head); });
  c.h_pop_phasal = us_per(n, [&](int) { queue::pop_phasal<LocalSlots<uint64_t>, uint64_t>(qs, cap, tail); });
}

// What a bucket's line adds to an operation that waits for it, when it comes from the caches
// below the first level: a bucket's words read in a scattered order over a container part's size
// (1 MiB) of registered memory this process wrote, each read naming the next (a find's next step
// waits for its bucket: the reads do not overlap), less the same reads of one bucket.
void line_component(Context& ctx, int n, Components& c) {
  using E = ScatteredBuckets::E;
  const ScatteredBuckets table(0);
  const GlobalPtr<Slot<E>> t = ctx.endpoint().allocate<Slot<E>>(ctx.rank(), table.count);
  Slot<E>* b = t.local();
  std::fill_n(b, table.count, Slot<E>{hash::kReady, E{1, 0}});
  size_t k = 0;
  for (size_t i = 0; i < table.order.size(); ++i) {  // one cycle through every visited bucket
    const size_t from = table.at(k);
    b[from].payload.value = table.next(k);
  }
  LocalSlots<E> s(b, nullptr);
  const size_t one = 0;  // a bucket of a page's first line: in no visit
  b[one].payload.value = one;
  size_t at = table.at(1);
  for (size_t i = 0; i < table.order.size(); ++i) at = s.read(at).payload.value;  // every line read once before timing
  size_t same = one;
  const double hot = us_per(n, [&](int) { same = s.read(same).payload.value; });
  const double scattered = us_per(n, [&](int) { at = s.read(at).payload.value; });
  c.line = std::max(0.0, scattered - hot);
  if (at + same == 42) c.line += 0;
  ctx.endpoint().deallocate(t);
}

// A container operation's own front end — routing, hashing, the status, the result — as a
// phasal find of a key in this process's own part, less the get it makes.
void front_component(Context& ctx, int n, Components& c) {
  HashMap<uint64_t, uint64_t> m(ctx, 64 * static_cast<size_t>(ctx.size()), Policy::OneSided);
  uint64_t key = 0;
  while (m.owner_of(key) != ctx.rank()) ++key;
  m.insert(key, 1);
  Endpoint& ep = ctx.endpoint();
  const GlobalPtr<uint64_t> near = ep.allocate<uint64_t>(ctx.rank(), 1);  // the get it makes: to the same process
  uint64_t sink = 0;
  // Rounds of finds and of gets in turns, the median of their differences: the two figures
  // drift together (a shared host), not apart.
  std::vector<double> fronts;
  for (int round = 0; round < 9; ++round) {
    const double find = us_per(n, [&](int) { sink += m.find(key, Level::PhasalFind).value_or(0); });
    const double get = us_per(n, [&](int) { sink += ep.rget(near); });
    fronts.push_back(find - get);
  }
  std::sort(fronts.begin(), fronts.end());
  c.op = std::max(0.0, fronts[fronts.size() / 2]);
  if (sink == 42) c.op += 0;
  ep.deallocate(near);
}

// The Cached policy's region operations as a container's part makes them: each on another
// control word managed by the other process (a part's words are its owner's), each write and
// read on another slot, the slots spread over many blocks and lines.
struct RegionBench {
  static constexpr size_t kBlock = 4096, kSpread = 256;
  coherence::Space& sp;
  region::Region& r;
  Slot<uint64_t>* slots;
  std::vector<uint64_t*> far;  // atomic words the peer manages (rank 0 only)

  RegionBench(Context& ctx, int other, region::Region& reg) : sp(ctx.space()), r(reg) {
    const size_t words_per_block = kBlock / 8, nb = 2 * static_cast<size_t>(ctx.size());
    uint64_t* words = sp.new_atomic_words(r, nb * words_per_block);
    slots = static_cast<Slot<uint64_t>*>(r.allocate(kSpread * kBlock, kBlock));
    for (size_t k = 0; k < nb * words_per_block; ++k)
      if (r.manager(r.block_of(words + k)) == other) far.push_back(words + k);
  }
  static size_t region_bytes(int processes) { return (2 * static_cast<size_t>(processes) + kSpread + 4) * kBlock; }
  Slot<uint64_t>* slot_in(size_t i) const {
    return reinterpret_cast<Slot<uint64_t>*>(reinterpret_cast<uint8_t*>(slots) + (i % kSpread) * kBlock) + (i * 37) % (kBlock / sizeof(Slot<uint64_t>));
  }
  coherence::AtomicRef word(size_t i) { return sp.atomic_ref(far[i % far.size()]); }
};

// Rank 0 alone: its releases keep the blocks it writes in place (no one else holds them).
void region_alone(RegionBench& x, int n, Components& c) {
  uint64_t sink = 0;
  auto word = [&](int i) { return x.word(static_cast<size_t>(i)); };
  c.region_atomic = us_per(n, [&](int i) { sink += word(i).fetch_add(1, Order::Relaxed); });
  const double load = us_per(n, [&](int i) { sink += word(i).load(Order::Relaxed); });
  c.region_acquire = std::max(0.0, us_per(n, [&](int i) { sink += word(i).load(Order::Acquire); }) - load);
  c.region_release_clean = std::max(0.0, us_per(n, [&](int i) { sink += word(i).fetch_add(1, Order::Release); }) - c.region_atomic);
  // A write to a block written and released before (as a container's slots are, once warm),
  // one slot in each block, then one release for them all.
  for (size_t b = 0; b < x.kSpread; ++b) x.sp.writing(x.slot_in(b))->payload = b;
  x.sp.release();
  const auto t0 = clk::now();
  for (size_t b = 0; b < x.kSpread; ++b) x.sp.writing(x.slot_in(b))->payload = b + 1;
  c.region_write = std::chrono::duration<double, std::micro>(clk::now() - t0).count() / x.kSpread;
  x.sp.release();
  const double both = us_per(n, [&](int i) {
    x.sp.writing(x.slot_in(static_cast<size_t>(i)))->payload = static_cast<uint64_t>(i);
    sink += word(i).fetch_add(1, Order::Release);
  });
  c.region_release = std::max(0.0, both - c.region_write - c.region_atomic);
  c.region_read = us_per(n, [&](int i) { sink += x.sp.reading(x.slot_in(static_cast<size_t>(i)))->payload; });
  if (sink == 42) c.region_read += 0;
}

// Every process writing the part (a map every process inserts into): before each of rank 0's
// rounds another process writes every block and releases, so rank 0's first write of a block
// takes a twin and opens it, and its release publishes the block. Collective.
void region_shared(Context& ctx, RegionBench& x, int co_writer, Components& c) {
  constexpr int kRounds = 5;
  std::vector<double> writes, boths;
  uint64_t sink = 0;
  for (int round = 0; round < 2 * kRounds; ++round) {
    if (ctx.rank() == co_writer) {
      for (size_t b = 0; b < x.kSpread; ++b) x.sp.writing(x.slot_in(b + 1))->payload = b;
      x.sp.release();
    }
    ctx.process_barrier();
    if (ctx.rank() == 0) {
      const auto t0 = clk::now();
      for (size_t b = 0; b < x.kSpread; ++b) {
        x.sp.writing(x.slot_in(b))->payload = b;
        if (round % 2 == 1) sink += x.word(b).fetch_add(1, Order::Release);
      }
      (round % 2 == 0 ? writes : boths).push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / x.kSpread);
      x.sp.release();
    }
    ctx.process_barrier();
  }
  if (ctx.rank() != 0) return;
  std::sort(writes.begin(), writes.end());
  std::sort(boths.begin(), boths.end());
  c.region_write_shared = writes[kRounds / 2];
  c.region_release_shared = std::max(0.0, boths[kRounds / 2] - c.region_write_shared - c.region_atomic);
  if (sink == 42) c.region_write_shared += 0;
}

void region_components(Context& ctx, int other, int n, Components& c) {
  coherence::Space& sp = ctx.space();
  region::RegionOptions o;
  o.size = RegionBench::region_bytes(ctx.size());
  o.local_bytes = 0;
  region::Region& r = sp.create_region(o);
  {
    RegionBench x(ctx, other, r);
    if (ctx.rank() == 0) region_alone(x, n, c);
    ctx.process_barrier();
    // The other writer: the peer, or with rank 0 measuring its own part another process.
    const int co_writer = other != 0 ? other : ctx.size() > 1 ? 1 : 0;
    if (co_writer != 0) {
      region_shared(ctx, x, co_writer, c);
    } else if (ctx.rank() == 0) {
      c.region_write_shared = c.region_write, c.region_release_shared = c.region_release;  // alone in the job
    }
  }
  ctx.process_barrier();
  sp.destroy_region(r);
}

}  // namespace

std::string fabric_label(Runtime& rt) {
  const fabric::Provider& p = rt.provider();
  const std::string name = p.info().name;
  for (int r = 0; r < rt.size(); ++r) {
    const std::string t = r == rt.rank() ? "shm" : p.transport(r);
    // A provider that names its transport between nodes already ("shm+verbs") keeps its name.
    if (t != "shm" && name.find(t) == std::string::npos) return name + "+" + t;
  }
  return name;
}

int calibration_peer(Context& ctx) { return ctx.runtime().bootstrap().allgather_value(other_of(ctx))[0]; }

Components measure_components(Context& ctx, int iters) { return measure_components(ctx, iters, calibration_peer(ctx)); }

Components measure_components(Context& ctx, int iters, int peer) {
  if (peer < 0 || peer >= ctx.size()) fail("objects: calibration: peer ", peer, " is not a rank of ", ctx.size());
  for (int other : ctx.runtime().bootstrap().allgather_value(peer))
    if (other != peer) fail("objects: calibration: the processes name different peers (", peer, " and ", other, ")");
  Components c;
  c.provider = fabric_label(ctx.runtime());
  c.processes = ctx.size();
  ctx.process_barrier();
  if (ctx.rank() == 0) {
    fabric_components(ctx, peer, iters, c);
    invoke_components(peer, iters, c);
    handler_components(iters, c);
    line_component(ctx, iters, c);
  }
  ctx.process_barrier();
  // Everyone CASes one word at rank 0 from the value it last saw.
  Endpoint& ep = ctx.endpoint();
  GlobalPtr<uint64_t> hot;
  if (ctx.rank() == 0) {
    hot = ep.allocate<uint64_t>(0, 1);
    *hot.local() = 0;
  }
  hot = ctx.runtime().bootstrap().allgather_value(hot)[0];
  ctx.process_barrier();
  uint64_t seen = 0;
  const int rounds = std::max(1, iters / 4);
  const double contended = us_per(rounds, [&](int) { seen = ep.compare_swap(hot, seen, seen + 1); });
  ctx.process_barrier();
  // Seed 001's persistent CAS: each CAS retried from the value it found until it changes the
  // word; and its single-variable fetch-and-add: everyone adding to the same word.
  const double persistent = us_per(rounds, [&](int) {
    for (uint64_t found; (found = ep.compare_swap(hot, seen, seen + 1)) != seen;) seen = found;
    ++seen;
  });
  ctx.process_barrier();
  const double single_fad = us_per(rounds, [&](int) { seen = ep.fetch_add(hot, 1); });
  ctx.process_barrier();
  if (ctx.rank() == 0) {
    c.cas_contended = contended, c.cas_persistent = persistent, c.fad_single = single_fad;
    ep.deallocate(hot);
  }
  region_components(ctx, peer, iters, c);
  front_component(ctx, iters, c);
  // Rank 0's figures for everyone.
  const std::string text = c.serialize();
  const auto all = ctx.runtime().bootstrap().allgather(std::as_bytes(std::span(text.data(), ctx.rank() == 0 ? text.size() : 0)));
  return Components::parse(std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size()), "rank 0's calibration");
}

}  // namespace loom::objects
