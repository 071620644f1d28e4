#include "loom/omp/team.hpp"

#include <functional>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/runtime.hpp"

namespace loom::omp {
namespace {

// A worksharing word: the construct's tag (which use of the word) above the count of
// iterations handed out (or 1 for a `single` taken).
constexpr int kNextBits = 40;
constexpr uint64_t kNextMask = (uint64_t{1} << kNextBits) - 1;
constexpr uint64_t kTagMask = (uint64_t{1} << (64 - kNextBits)) - 1;

// Tags count up modulo 2^24: `a` is newer than `b` when it is ahead by less than half the range.
bool newer(uint64_t a, uint64_t b) { return a != b && ((a - b) & kTagMask) < kTagMask / 2; }

}  // namespace

// Written by rank 0's master before the fork barrier, read by every thread after it.
struct Team::Descriptor {
  uint64_t seq;  // regions started
  uint64_t fn;
  uint64_t data;
  uint64_t end;  // the team has ended: leave
  uint64_t has_loop;
  LoopSpec loop;  // started by every thread before fn (a combined parallel loop)
};

struct Team::ThreadState {
  Team* team = nullptr;
  int num = 0;
  uint64_t constructs = 0;  // worksharing constructs this thread has met (the same count in every thread)
  LoopSpec loop;
  uint64_t loop_construct = 0, loop_trip = 0;
  // An ordered loop: its turn word's construct, the chunk this thread holds, and whether that
  // chunk has its turn.
  bool ordered = false, holding = false, turn = false;
  uint64_t ordered_construct = 0;
  IterRange chunk;
};

Team::ThreadState& Team::state() {
  thread_local ThreadState s;
  return s;
}

Team::Team(coherence::Space& space) : space_(space) {
  Runtime& rt = space.runtime();
  rank_ = rt.rank();
  per_process_ = rt.threads_per_process();
  size_ = rt.size() * per_process_;
  const auto here = reinterpret_cast<uint64_t>(&Team::current);
  for (uint64_t a : rt.bootstrap().allgather_value(here))
    if (a != here)
      fail("omp: the processes run the program at different addresses; start them with one layout "
           "(loomrun --same-layout, or setarch -R under another launcher)");
  control_ = &space.create_region(4 * 4096, 4096, 0);
  desc_ = static_cast<Descriptor*>(control_->allocate(sizeof(Descriptor), 64));
  words_ = space.new_atomic_words(*control_, kWords);
  unnamed_ = space.make_lock();
  named_ = std::make_unique<NamedLocks>(space, *control_);
  for (size_t i = 0; i < kAtomicLocks; ++i) atomic_.push_back(space.make_lock());
  flush_word_ = space.make_atomic();
  state() = ThreadState{};  // this thread's count of constructs starts with the team's words
  for (int t = 1; t < per_process_; ++t) threads_.push_back(rt.spawn_at(t, "omp-thread", [this, t] { run_regions(t); }));
}

Team::~Team() {
  if (rank_ == 0) {
    desc_->end = 1;
    space_.barrier();  // the fork barrier every thread waits in: they read `end` and leave
  }
  for (auto& t : threads_) t.join();
  space_.destroy_region(*control_);
}

Team* Team::current() { return state().team; }
int Team::thread_num() { return state().num; }

void Team::parallel(Outlined fn, void* data, unsigned requested, const LoopSpec* loop) {
  if (rank_ != 0) fail("omp: a parallel region starts on rank 0's master; rank ", rank_, " serves regions (Team::serve)");
  if (state().team != nullptr) fail("omp: Team::parallel inside a region (nested regions are run by the ABI layer, serialized)");
  if (requested != 0 && requested != static_cast<unsigned>(size_))
    fail("omp: a team of ", requested, " threads; every region runs on all ", size_,
         " threads of the job (processes x threads per process)");
  desc_->fn = reinterpret_cast<uint64_t>(fn);
  desc_->data = reinterpret_cast<uint64_t>(data);
  desc_->has_loop = loop != nullptr ? 1 : 0;
  if (loop != nullptr) desc_->loop = *loop;
  desc_->seq += 1;
  region_active_.store(true, std::memory_order_release);
  space_.barrier();  // fork: the descriptor is released to every thread
  run_region(0);
  region_active_.store(false, std::memory_order_release);
}

void Team::serve() {
  if (rank_ == 0) fail("omp: rank 0's master runs the program; Team::serve is for the other ranks");
  run_regions(0);
}

void Team::run_regions(int index) {
  while (true) {
    space_.barrier();  // fork: pairs with the master's in parallel() (or its end in ~Team)
    if (desc_->end != 0) return;
    run_region(index);
  }
}

// One region on this thread: the outlined function, then the join.
void Team::run_region(int index) {
  ThreadState& s = state();
  s.team = this;
  s.num = rank_ * per_process_ + index;
  const auto fn = reinterpret_cast<Outlined>(desc_->fn);
  void* data = reinterpret_cast<void*>(desc_->data);
  if (desc_->has_loop != 0) loop_start(desc_->loop);
  fn(data);
  s.team = nullptr;
  s.num = 0;
  space_.barrier();  // join: every thread's writes in the region are released to all
}

void Team::run_serialized(Outlined fn, void* data, const LoopSpec* loop) {
  ThreadState& s = state();
  const ThreadState saved = s;
  s = ThreadState{};
  if (loop != nullptr) loop_start(*loop);
  fn(data);
  s = saved;
}

void Team::barrier() {
  if (Team* t = state().team) t->space_.barrier();
}

const LoopSpec& Team::current_loop() { return state().loop; }

coherence::AtomicRef Team::word_for(uint64_t construct, uint64_t& tag) {
  tag = (construct / kWords + 1) & kTagMask;
  return space_.atomic_ref(&words_[construct % kWords]);
}

bool Team::single_start() {
  ThreadState& s = state();
  const uint64_t construct = s.constructs++;
  return s.team == nullptr || s.team->take_single(construct);
}

bool Team::take_single(uint64_t construct) {
  uint64_t tag = 0;
  auto w = word_for(construct, tag);
  uint64_t cur = w.load();
  while (true) {
    const uint64_t seen = cur >> kNextBits;
    if (seen == tag) return false;
    if (newer(seen, tag)) fail_ahead();
    const uint64_t old = w.compare_swap(cur, (tag << kNextBits) | 1);
    if (old == cur) return true;
    cur = old;
  }
}

void Team::loop_start(const LoopSpec& loop) {
  if (loop.n > kNextMask) fail("omp: a loop of ", loop.n, " iterations; this layer hands out at most 2^40 - 1");
  ThreadState& s = state();
  s.loop = loop;
  s.loop_construct = s.constructs++;
  s.loop_trip = 0;
  s.ordered = s.holding = s.turn = false;
}

void Team::loop_start_ordered(const LoopSpec& loop) {
  loop_start(loop);
  ThreadState& s = state();
  s.ordered = s.team != nullptr;
  s.ordered_construct = s.constructs++;
}

void Team::ordered_start() {
  ThreadState& s = state();
  if (s.ordered && s.holding && !s.turn) s.team->wait_turn(s);
}

// The turn word holds the first iteration of the chunk whose turn it is (an older tag: this
// loop's first chunk, iteration 0).
void Team::wait_turn(ThreadState& s) {
  uint64_t tag = 0;
  auto w = word_for(s.ordered_construct, tag);
  wait::Backoff backoff;
  // Polled relaxed (an acquire applies notices and leases on every look); once the turn is
  // here, one acquiring load pairs with hand_on_turn's release, which it now reads or follows.
  while (true) {
    const uint64_t cur = w.load(coherence::Order::Relaxed);
    const uint64_t seen = cur >> kNextBits;
    if (seen != tag && newer(seen, tag)) fail_ahead();
    if ((seen == tag ? (cur & kNextMask) : 0) == s.chunk.first) break;
    backoff.pause();
  }
  w.load(coherence::Order::Acquire);
  s.turn = true;
}

void Team::hand_on_turn(ThreadState& s) {
  if (!s.turn) wait_turn(s);
  uint64_t tag = 0;
  word_for(s.ordered_construct, tag).store((tag << kNextBits) | s.chunk.last, coherence::Order::Release);
  s.holding = s.turn = false;
}

std::optional<IterRange> Team::loop_next() {
  ThreadState& s = state();
  if (s.holding) s.team->hand_on_turn(s);
  const LoopSpec& l = s.loop;
  const int threads = s.team != nullptr ? s.team->size_ : 1;
  std::optional<IterRange> r;
  if (l.kind == ScheduleKind::Static || l.kind == ScheduleKind::Auto || s.team == nullptr)
    r = static_range(l.n, threads, s.team != nullptr ? s.num : 0, l.chunk, s.loop_trip++);
  else
    r = s.team->take_chunk(l, s.loop_construct);
  if (s.ordered && r) {
    s.chunk = *r;
    s.holding = true;
  }
  return r;
}

// The next chunk of a dynamic or guided loop from the construct's word.
std::optional<IterRange> Team::take_chunk(const LoopSpec& l, uint64_t construct) {
  uint64_t tag = 0;
  auto w = word_for(construct, tag);
  uint64_t cur = w.load();
  while (true) {
    const uint64_t seen = cur >> kNextBits;
    if (seen != tag && newer(seen, tag)) fail_ahead();
    const uint64_t next = seen == tag ? (cur & kNextMask) : 0;  // an older tag: this loop's first chunk
    if (next >= l.n) return std::nullopt;
    const uint64_t take = l.kind == ScheduleKind::Guided ? guided_chunk(l.n - next, size_, l.chunk)
                                                         : std::min(std::max<uint64_t>(l.chunk, 1), l.n - next);
    const uint64_t old = w.compare_swap(cur, (tag << kNextBits) | (next + take));
    if (old == cur) return IterRange{next, next + take};
    cur = old;
  }
}

void Team::fail_ahead() {
  fail("omp: a thread is more than ", kWords, " worksharing constructs ahead of another (constructs with nowait and no "
       "barrier between them); this layer keeps ", kWords, " in flight");
}

coherence::Lock& Team::lock_for(const void* name) {
  if (name == nullptr) return unnamed_;
  return named_->of(name);
}

void Team::critical_start(const void* name) { lock_for(name).lock(); }
bool Team::critical_try(const void* name) { return lock_for(name).try_lock(); }
void Team::critical_end(const void* name) { lock_for(name).unlock(); }
void Team::atomic_start(uintptr_t address) { atomic_[(address >> 6) % kAtomicLocks].lock(); }
void Team::atomic_end(uintptr_t address) { atomic_[(address >> 6) % kAtomicLocks].unlock(); }
void Team::flush() { space_.fence(flush_word_); }

}  // namespace loom::omp
