#pragma once
// How an Auto object picks and re-picks its policy per operation and level (docs/objects.md,
// "Auto"). The model's cheapest policy starts; with adaptation on, one operation in kSampleEvery
// is timed, and one in kProbeEvery runs under the other policy so its estimate stays current
// (kFarFactor times less often while that one looks kFar times dearer); a
// policy's estimate is the median of its last kWindow samples (the model's prediction until
// then), so one outlier moves nothing. The cell switches when the estimate of the policy in use
// exceeds the other's by kHysteresis on kStrikes samples in a row — the owner stopped polling,
// the fabric is loaded — and switches back the same way; an estimate that is still mostly the
// model's best case is measured (the next operations probe it) before a switch is made to it.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "loom/objects/cost_model.hpp"

namespace loom::objects {

class Chooser {
 public:
  static constexpr uint32_t kSampleEvery = 64;
  static constexpr uint32_t kProbeEvery = 1024;
  static constexpr double kHysteresis = 1.3;
  static constexpr uint32_t kStrikes = 2;  // samples in a row past the hysteresis before a switch
  static constexpr size_t kWindow = 5;     // an estimate is the median of the last samples
  static constexpr double kFar = 4;        // the other policy looks this much dearer: ...
  static constexpr uint32_t kFarFactor = 16; // ... it is probed this many times less often
  static constexpr double kDearUs = 1.0;     // the policy in use costs this much: time every operation

  // `a` and `b`: the two policies the object's placement allows (OneSided and OwnerInvoked).
  Chooser(const Components& c, bool adapt, Policy a, Policy b) : adapt_(adapt), cand_{a, b} {
    for (Op op : kOps)
      for (Level l : {Level::Atomic, Level::PhasalWrite}) {
        Cell& cell = cell_of(op, l);
        double model[2];
        for (int k = 0; k < 2; ++k) {
          model[k] = predict(c, op, cand_[k], l);
          for (auto& w : cell.window[k]) w.store(model[k], std::memory_order_relaxed);
        }
        cell.current.store(model[1] < model[0] ? 1 : 0, std::memory_order_relaxed);
      }
  }

  // The policy for this operation; `timed` says whether to time it and call record().
  Policy pick(Op op, Level l, bool& timed) {
    Cell& c = cell_of(op, l);
    const int cur = c.current.load(std::memory_order_relaxed);
    timed = false;
    if (!adapt_) return cand_[cur];
    // A count, not a sequence: threads that race here may lose an increment (no locked
    // instruction on every operation).
    const uint32_t n = c.ops.load(std::memory_order_relaxed);
    c.ops.store(n + 1, std::memory_order_relaxed);
    // Operations that take microseconds are all timed (the clock costs nothing beside them),
    // so a policy that went bad is left within a few operations.
    const bool asked = c.probe_now.load(std::memory_order_relaxed);
    if (n % kSampleEvery != 0 && !c.dear.load(std::memory_order_relaxed) && !asked) return cand_[cur];
    timed = true;
    // The other policy, now and then (rarely while it looks much dearer than this one), and
    // whenever this one looks dearer than the other's estimate before that was measured.
    const uint32_t probe = c.far.load(std::memory_order_relaxed) ? kProbeEvery * kFarFactor : kProbeEvery;
    if (asked) c.probe_now.store(false, std::memory_order_relaxed);
    return asked || (n % probe == 0 && n != 0) ? cand_[1 - cur] : cand_[cur];
  }
  void record(Op op, Level l, Policy used, double us) {
    Cell& c = cell_of(op, l);
    const int k = used == cand_[0] ? 0 : 1;
    const uint32_t seen = c.next[k].fetch_add(1, std::memory_order_relaxed);
    c.window[k][seen % kWindow].store(us, std::memory_order_relaxed);
    const int cur = c.current.load(std::memory_order_relaxed);
    c.far.store(estimate(c, 1 - cur) > kFar * estimate(c, cur), std::memory_order_relaxed);
    if (k == cur) c.dear.store(us > kDearUs, std::memory_order_relaxed);
    if (estimate(c, cur) <= kHysteresis * estimate(c, 1 - cur)) {
      c.strikes.store(0, std::memory_order_relaxed);
      return;
    }
    // The other policy's estimate is still mostly the model's (a best case): measure it first.
    if (c.next[1 - cur].load(std::memory_order_relaxed) < kWindow / 2 + 1) {
      c.probe_now.store(true, std::memory_order_relaxed);
      return;
    }
    if (c.strikes.fetch_add(1, std::memory_order_relaxed) + 1 < kStrikes) return;
    int expected = cur;
    if (c.current.compare_exchange_strong(expected, 1 - cur, std::memory_order_relaxed)) {
      c.strikes.store(0, std::memory_order_relaxed);
      switches_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  Policy current(Op op, Level l) const { return cand_[cell_of(op, l).current.load(std::memory_order_relaxed)]; }
  double estimate(Op op, Level l, Policy p) const { return estimate(cell_of(op, l), p == cand_[0] ? 0 : 1); }
  uint64_t switches() const { return switches_.load(std::memory_order_relaxed); }

 private:
  struct Cell {
    std::atomic<int> current{0};
    std::atomic<uint32_t> ops{0};
    std::atomic<uint32_t> strikes{0};
    std::atomic<bool> far{false};
    std::atomic<bool> dear{false};
    std::atomic<bool> probe_now{false};
    std::atomic<uint32_t> next[2] = {};
    std::array<std::atomic<double>, kWindow> window[2];
  };
  static double estimate(const Cell& c, int k) {
    std::array<double, kWindow> v;
    for (size_t i = 0; i < kWindow; ++i) v[i] = c.window[k][i].load(std::memory_order_relaxed);
    std::nth_element(v.begin(), v.begin() + kWindow / 2, v.end());
    return v[kWindow / 2];
  }
  static size_t index(Op op, Level l) { return static_cast<size_t>(op) * 2 + (l == Level::Atomic ? 0 : 1); }
  Cell& cell_of(Op op, Level l) { return cells_[index(op, l)]; }
  const Cell& cell_of(Op op, Level l) const { return cells_[index(op, l)]; }

  bool adapt_;
  Policy cand_[2];
  std::array<Cell, 8> cells_;
  std::atomic<uint64_t> switches_{0};
};

// LOOM_OBJECTS_ADAPT: whether Auto objects adapt (read once).
bool adaptation_enabled();

// Times one operation when asked to (steady_clock, microseconds).
class OpTimer {
 public:
  explicit OpTimer(bool on) : on_(on) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  double us() const { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count(); }
  bool on() const { return on_; }

 private:
  bool on_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace loom::objects
