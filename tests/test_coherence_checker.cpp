// A randomized checker of the coherence protocol. Each program is data-race free by
// construction: in every phase each shared word belongs to one lock, critical sections touch
// only their lock's words, and phases are separated by barriers. Every process can regenerate
// every process's program from the seed; what they exchange afterwards is what they observed:
// each critical section's position in its lock's order (read from a counter the section itself
// increments) and every value it read. A sequential replay in that order must produce every
// observed read, every lock order must be a gapless sequence, and the memory after the last
// barrier must equal the replay's. Programs run back to back in one launch. Half the locks are
// queue locks (Lock); the others are test-and-set locks on atomic words inside the region
// (AtomicRef: CAS with acquire, store with release), which carry the same proof obligation.
// Accesses are plain loads and stores or explicit ones (Space::reading of every block, which
// pipelines the misses; Space::writing of one word).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "loom/coherence/space.hpp"
#include "tests/test_settings_table.hpp"
#include "tests/coherence_policies.hpp"
#include "tests/mp_test.hpp"

using loom::coherence::AtomicRef;
using loom::coherence::Config;
using loom::coherence::Lock;
using loom::coherence::Policy;
using loom::coherence::Space;
using loom::test::rt;

namespace {

constexpr int kWords = 48;
constexpr int kLocks = 4;
constexpr int kPhases = 3;
constexpr int kBlocks = 6;
constexpr int kPerBlock = 512;  // uint64 slots per 4 KiB block

enum Kind : uint8_t { kRead, kWrite, kInc };
struct Op {
  Kind kind;
  int word;
  uint64_t value;
};
struct Section {
  int lock;
  std::vector<Op> ops;
};
// program[phase][process] = that process's critical sections in program order.
using Program = std::vector<std::vector<std::vector<Section>>>;

// Words of different locks share blocks: false sharing is the common case, not the exception.
size_t word_index(int w) { return static_cast<size_t>(w % kBlocks) * kPerBlock + static_cast<size_t>(w / kBlocks); }
size_t seq_index(int l) { return static_cast<size_t>(l % kBlocks) * kPerBlock + 200 + static_cast<size_t>(l); }

Program generate(uint64_t seed, int nprocs) {
  Program prog(kPhases);
  for (int f = 0; f < kPhases; ++f) {
    std::mt19937_64 shared(seed * 1000003 + static_cast<uint64_t>(f));
    std::vector<int> owner(kWords);
    for (int w = 0; w < kWords; ++w) owner[static_cast<size_t>(w)] = static_cast<int>(shared() % kLocks);
    prog[static_cast<size_t>(f)].resize(static_cast<size_t>(nprocs));
    for (int p = 0; p < nprocs; ++p) {
      std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(f) * 131 + static_cast<uint64_t>(p));
      int sections = 1 + static_cast<int>(rng() % 3);
      for (int c = 0; c < sections; ++c) {
        Section s;
        s.lock = static_cast<int>(rng() % kLocks);
        std::vector<int> mine;
        for (int w = 0; w < kWords; ++w)
          if (owner[static_cast<size_t>(w)] == s.lock) mine.push_back(w);
        int ops = mine.empty() ? 0 : 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < ops; ++k) {
          Op op;
          op.word = mine[rng() % mine.size()];
          op.kind = static_cast<Kind>(rng() % 3);
          op.value = rng() & 0xffffffffffull;
          s.ops.push_back(op);
        }
        prog[static_cast<size_t>(f)][static_cast<size_t>(p)].push_back(std::move(s));
      }
    }
  }
  return prog;
}

// A queue lock, or (odd locks) a test-and-set lock on an atomic word of the region.
struct CheckerLock {
  std::optional<Lock> queue;
  std::optional<AtomicRef> word;
  uint64_t me = 0;
  void lock() {
    if (queue) return queue->lock();
    while (word->compare_swap(0, me, loom::coherence::Order::Acquire) != 0) {
    }
  }
  void unlock() {
    if (queue) return queue->unlock();
    word->store(0, loom::coherence::Order::Release);
  }
};

struct Replay {
  std::vector<uint64_t> mem = std::vector<uint64_t>(kWords, 0);
  std::vector<uint64_t> seq = std::vector<uint64_t>(kLocks, 0);
};

// Runs `programs` programs on one fresh region; returns an empty string or the first
// discrepancy.
std::string run_batch(Space& s, uint64_t first_seed, int programs) {
  const int me = rt().rank(), n = rt().size();
  auto& region = s.create_region(1 << 20);
  auto* base = region.new_array<uint64_t>(static_cast<size_t>(kBlocks) * kPerBlock);
  uint64_t* words = s.new_atomic_words(region, kLocks);
  std::vector<CheckerLock> locks(kLocks);
  for (int l = 0; l < kLocks; ++l) {
    CheckerLock& k = locks[static_cast<size_t>(l)];
    if (l % 2 == 0) k.queue = s.make_lock();
    else k.word = s.atomic_ref(&words[l]);
    k.me = static_cast<uint64_t>(me) + 1;
  }
  Replay rep;
  std::string error;
  for (int pi = 0; pi < programs && error.empty(); ++pi) {
    uint64_t seed = first_seed + static_cast<uint64_t>(pi);
    Program prog = generate(seed, n);
    // Execute this process's part, recording what it observed.
    std::vector<uint64_t> obs;
    for (int f = 0; f < kPhases; ++f) {
      for (const Section& sec : prog[static_cast<size_t>(f)][static_cast<size_t>(me)]) {
        locks[static_cast<size_t>(sec.lock)].lock();
        uint64_t pos = base[seq_index(sec.lock)];
        base[seq_index(sec.lock)] = pos + 1;
        obs.push_back(pos);
        for (const Op& op : sec.ops) {
          uint64_t& w = base[word_index(op.word)];
          // Half the reads through an explicit read of every block (pipelined misses), half the
          // writes through an explicit write of the word; the rest plain loads and stores.
          const bool explicit_access = (op.value & 1) != 0;
          switch (op.kind) {
            case kRead:
              obs.push_back(explicit_access ? s.reading(base, static_cast<size_t>(kBlocks) * kPerBlock)[word_index(op.word)] : w);
              break;
            case kWrite:
              if (explicit_access) *s.writing(&w) = op.value;
              else w = op.value;
              break;
            case kInc: {
              uint64_t v = w;
              obs.push_back(v);
              w = v + 1;
              break;
            }
          }
        }
        locks[static_cast<size_t>(sec.lock)].unlock();
      }
      s.barrier();
    }
    std::vector<uint64_t> final_mem(kWords + kLocks);
    for (int w = 0; w < kWords; ++w) final_mem[static_cast<size_t>(w)] = base[word_index(w)];
    for (int l = 0; l < kLocks; ++l) final_mem[static_cast<size_t>(kWords + l)] = base[seq_index(l)];
    s.barrier();  // nobody writes the next program's words before everyone read these
    obs.insert(obs.end(), final_mem.begin(), final_mem.end());
    auto all = rt().bootstrap().allgather(std::as_bytes(std::span(obs)));

    // Replay phase by phase, lock by lock, in the observed order.
    std::vector<std::vector<uint64_t>> seen(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      seen[static_cast<size_t>(p)].resize(all[static_cast<size_t>(p)].size() / 8);
      std::memcpy(seen[static_cast<size_t>(p)].data(), all[static_cast<size_t>(p)].data(), all[static_cast<size_t>(p)].size());
    }
    std::vector<size_t> cursor(static_cast<size_t>(n), 0);
    std::ostringstream why;
    for (int f = 0; f < kPhases && error.empty(); ++f) {
      struct Entry {
        int proc;
        const Section* sec;
        uint64_t pos;
        size_t at;  // index of its first read in seen[proc]
      };
      std::vector<Entry> entries;
      for (int p = 0; p < n; ++p)
        for (const Section& sec : prog[static_cast<size_t>(f)][static_cast<size_t>(p)]) {
          size_t& c = cursor[static_cast<size_t>(p)];
          Entry e{p, &sec, seen[static_cast<size_t>(p)].at(c), c + 1};
          size_t reads = 0;
          for (const Op& op : sec.ops) reads += op.kind != kWrite;
          c += 1 + reads;
          entries.push_back(e);
        }
      std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.sec->lock != b.sec->lock ? a.sec->lock < b.sec->lock : a.pos < b.pos;
      });
      for (const Entry& e : entries) {
        uint64_t& next = rep.seq[static_cast<size_t>(e.sec->lock)];
        if (e.pos != next) {
          why << "program " << seed << " phase " << f << ": lock " << e.sec->lock << " order has position " << e.pos
              << " (process " << e.proc << ") where " << next << " was due: two holders at once or a stale counter";
          error = why.str();
          break;
        }
        ++next;
        size_t r = e.at;
        for (const Op& op : e.sec->ops) {
          uint64_t& w = rep.mem[static_cast<size_t>(op.word)];
          if (op.kind == kWrite) {
            w = op.value;
            continue;
          }
          uint64_t got = seen[static_cast<size_t>(e.proc)][r++];
          if (got != w) {
            why << "program " << seed << " phase " << f << ": process " << e.proc << " read word " << op.word << " = " << got
                << " under lock " << e.sec->lock << " at position " << e.pos << "; the replay says " << w;
            error = why.str();
            break;
          }
          if (op.kind == kInc) w += 1;
        }
        if (!error.empty()) break;
      }
    }
    for (int p = 0; p < n && error.empty(); ++p) {
      const auto& v = seen[static_cast<size_t>(p)];
      for (int w = 0; w < kWords + kLocks; ++w) {
        uint64_t want = w < kWords ? rep.mem[static_cast<size_t>(w)] : rep.seq[static_cast<size_t>(w - kWords)];
        uint64_t got = v[v.size() - static_cast<size_t>(kWords + kLocks) + static_cast<size_t>(w)];
        if (got != want) {
          why << "program " << seed << ": after the last barrier process " << p << " reads "
              << (w < kWords ? "word " : "lock counter ") << (w < kWords ? w : w - kWords) << " = " << got << "; the replay says " << want;
          error = why.str();
          break;
        }
      }
    }
  }
  s.destroy_region(region);
  return error;
}

// A fresh region every kProgramsPerRegion programs: its blocks have never been shared, so
// releases claim them exclusively again and later programs downgrade them.
constexpr int kProgramsPerRegion = 20;
std::string run_programs(Space& s, uint64_t first_seed, int programs) {
  std::string error;
  for (int done = 0; done < programs && error.empty(); done += kProgramsPerRegion)
    error = run_batch(s, first_seed + static_cast<uint64_t>(done), std::min(kProgramsPerRegion, programs - done));
  return error;
}

}  // namespace

class CoherenceChecker : public loom::test::PerPolicy {};

// LOOM_TEST_DSM_SEED, or else a new seed each run (rank 0's, so every rank runs the same
// programs), printed so that a failure can be run again.
uint64_t checker_seed() {
  if (loom::settings::raw(loom::test_settings::kDsmSeed))
    return static_cast<uint64_t>(loom::settings::get_int(loom::test_settings::kDsmSeed, 0));
  std::random_device rd;
  uint64_t seed = ((uint64_t{rd()} << 32) | rd()) & ((uint64_t{1} << 62) - 1);
  seed = rt().bootstrap().allgather_value(seed)[0];
  if (rt().rank() == 0) std::printf("[checker] seed %llu (LOOM_TEST_DSM_SEED=%llu runs these programs again)\n",
                                    static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

TEST_P(CoherenceChecker, RandomDataRaceFreePrograms) {
  const int programs = static_cast<int>(loom::settings::get_int(loom::test_settings::kDsmPrograms));
  const uint64_t seed = checker_seed();
  Space& s = space();
  const std::string name = GetParam().name();
  std::string err = run_programs(s, seed, programs);
  ASSERT_EQ(err, "") << "policy " << name;
  // The programs are data-race free: the checking mode's race report must find nothing.
  if (rt().collectives().checking()) {
    EXPECT_EQ(s.stats().races, 0u) << "policy " << name << ", seed " << seed;
  }
  if (rt().rank() == 0) {
    auto st = s.stats();
    std::printf("[checker] %s: %d programs; misses %llu, fast reads %llu, released %llu, invalidations %llu, retries %llu, "
                "exclusive claims %llu, downgrades %llu\n",
                name.c_str(), programs, static_cast<unsigned long long>(st.read_misses),
                static_cast<unsigned long long>(st.fast_reads), static_cast<unsigned long long>(st.released_blocks),
                static_cast<unsigned long long>(st.invalidations), static_cast<unsigned long long>(st.fetch_retries),
                static_cast<unsigned long long>(st.exclusive_claims), static_cast<unsigned long long>(st.downgrades));
  }
}

LOOM_FOR_EACH_POLICY(CoherenceChecker);
