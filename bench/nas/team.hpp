#pragma once
// The team a NAS kernel runs on: members (processes x threads), barriers, sums, memory every
// member sees, and each member's part of an index range. Two back ends implement it: Loom
// (team_loom.cpp: arrays in a shared region, processes x threads under loomrun) and OpenMP
// (team_omp.cpp: the same kernels as threads of one process). A kernel is written once, as
// shared-memory code: members read and write the shared arrays with plain loads and stores,
// and may name a range they are about to read or write in bulk (reading/writing), which the
// Loom back end turns into explicit accesses and the OpenMP one ignores.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::nas {

struct Range {
  size_t lo = 0, hi = 0;
  size_t size() const { return hi - lo; }
  bool empty() const { return hi <= lo; }
};

// Part `member` of `members` of [0, n): contiguous, in member order, boundaries multiples of
// `grain` (except n itself), sizes differing by at most one grain.
Range partition(size_t n, int member, int members, size_t grain = 1);

class Team {
 public:
  static constexpr int kMaxSum = 16;  // values one sum() adds at once

  virtual ~Team() = default;
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int rank() const { return process_ * threads_ + thread_; }  // member index
  int size() const { return processes_ * threads_; }
  int process() const { return process_; }
  int processes() const { return processes_; }
  int thread() const { return thread_; }
  int threads() const { return threads_; }
  bool leader() const { return rank() == 0; }
  virtual std::string backend() const = 0;  // "loom-<policy>" or "omp"

  // Every member of every process; what any member wrote before it is visible to all after it.
  virtual void barrier() = 0;
  // Collective: v[0..count) becomes the sum over all members, added in member order (so every
  // member holds the same bits). Includes a barrier.
  void sum(double* v, int count);
  double sum(double v) {
    sum(&v, 1);
    return v;
  }
  double max(double v);

  // Collective: n zeroed T that every member sees at the same address (n may be 0).
  template <typename T>
  T* shared(size_t n) {
    return static_cast<T*>(allocate(std::max<size_t>(n * sizeof(T), 1), 0));
  }
  // The same, for an array whose members read and write it in contiguous pieces of `piece`
  // bytes, each piece one member's (the Loom back end moves it in blocks as large as a piece
  // allows: a power of two dividing it, 4 to 64 KiB).
  template <typename T>
  T* shared(size_t n, size_t piece) {
    return static_cast<T*>(allocate(std::max<size_t>(n * sizeof(T), 1), piece));
  }

  // Names [p, p+n) as about to be read (until the next barrier or sum) or written in bulk; use
  // the returned pointer for the access.
  template <typename T>
  const T* reading(const T* p, size_t n) {
    return static_cast<const T*>(read_view(p, n * sizeof(T)));
  }
  template <typename T>
  T* writing(T* p, size_t n) {
    return static_cast<T*>(write_view(p, n * sizeof(T), false));
  }
  // Names [p, p+n) as about to be read through p itself (until the next barrier or sum): for
  // ranges read in pieces too scattered for one view (BT's rows of every plane).
  template <typename T>
  void will_read(const T* p, size_t n) {
    read_in_place(p, n * sizeof(T));
  }
  // writing, of a range every byte of which the member writes before the next barrier or sum
  // (the Loom back end takes no twin of it and publishes it whole).
  template <typename T>
  T* overwriting(T* p, size_t n) {
    return static_cast<T*>(write_view(p, n * sizeof(T), true));
  }

  Range part(size_t n, size_t grain = 1) const { return partition(n, rank(), size(), grain); }
  // Bytes of one coherence unit (block) of the shared memory: a useful grain for parts.
  virtual size_t unit() const { return 64; }

 protected:
  Team(int process, int processes, int thread, int threads)
      : process_(process), processes_(processes), thread_(thread), threads_(threads) {}
  // Collective over members; implemented once per process by the first thread. piece: 0, or
  // the bytes of the pieces members access (see shared).
  virtual void* allocate(size_t bytes, size_t piece) = 0;
  // Collective: the sums' slots (called by each back end once its members exist).
  void make_slots() { slots_ = shared<double>(2 * static_cast<size_t>(size()) * kMaxSum); }
  // Around a kernel's timed section (TeamTimer), for the back end's counters.
  virtual void timed_section(bool /*starting*/) {}
  virtual const void* read_view(const void* p, size_t) { return p; }
  virtual void read_in_place(const void*, size_t) {}
  virtual void* write_view(void* p, size_t, bool /*whole*/) { return p; }
  // The sums' slots: 2 banks x size() members x kMaxSum doubles, made by the back end.
  double* slots_ = nullptr;

 private:
  friend class TeamTimer;
  int process_, processes_, thread_, threads_;
  uint64_t sums_ = 0;
};

}  // namespace loom::nas
