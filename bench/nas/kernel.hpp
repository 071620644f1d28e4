#pragma once
// What a NAS kernel is to the two drivers (nas_loom, nas_omp): a name, its run on a team at a
// class, and the shared memory it needs; and the NPB summary every run prints.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/nas/team.hpp"

namespace loom::nas {

struct Result {
  std::string kernel;  // "CG"
  char cls = 'S';
  std::string size;    // "14000", "256x256x256"
  int iterations = 0;
  double seconds = 0;  // the timed section, as the leader saw it
  double mops = 0;
  std::string operation;  // "floating point", "keys ranked", "Random numbers generated"
  bool verified = false;
  std::vector<std::string> details;  // what was checked against what
};

struct Kernel {
  const char* name;                     // "ep", "cg", "is", "mg", "ft", "bt"
  Result (*run)(Team&, char cls);       // collective; throws std::invalid_argument on a bad class
  size_t (*shared_bytes)(char cls, int members);  // the shared allocations of a run (throws on a bad class)
};

// The kernels, and one by name (nullptr if none).
const std::vector<Kernel>& kernels();
const Kernel* find_kernel(const std::string& name);
// 'S', 'W', 'A', 'B' from a string ("S" or "s"); 0 if none.
char parse_class(const std::string& s);

// The NPB summary (Class, Size, Iterations, Time, Mop/s, Verification) on stdout.
void print_summary(const Result& r, int processes, int threads, const std::string& backend);

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Starts after a barrier and stops after one: the time of the slowest member.
class TeamTimer {
 public:
  explicit TeamTimer(Team& t) : team_(t) {
    team_.barrier();
    team_.timed_section(true);
    t0_ = Clock::now();
  }
  double stop() {
    team_.barrier();
    const double s = seconds_since(t0_);
    team_.timed_section(false);
    return s;
  }

 private:
  Team& team_;
  Clock::time_point t0_;
};

// |got - want| / |want| <= tol, with a line for the details.
bool check_relative(const char* what, double got, double want, double tol, std::vector<std::string>& details);

Result run_ep(Team& team, char cls);
Result run_cg(Team& team, char cls);
Result run_is(Team& team, char cls);
Result run_mg(Team& team, char cls);
Result run_ft(Team& team, char cls);
Result run_bt(Team& team, char cls);
size_t ep_shared_bytes(char cls, int members);
size_t cg_shared_bytes(char cls, int members);
size_t is_shared_bytes(char cls, int members);
size_t mg_shared_bytes(char cls, int members);
size_t ft_shared_bytes(char cls, int members);
size_t bt_shared_bytes(char cls, int members);

}  // namespace loom::nas
