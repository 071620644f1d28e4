#pragma once
// The OpenMP layer in one process of the job: the runtime, the Space, the program's globals
// shared in place, the stack rank 0's main runs on (shared, so the argument blocks the compiler
// builds in the master's frames are readable everywhere), the team, and the schedule
// `schedule(runtime)` takes. Made before main by the process start (start.cpp), ended
// collectively when the program ends.
#include <memory>

#include "loom/coherence/space.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/omp/schedule.hpp"
#include "loom/omp/team.hpp"

namespace loom::omp {

class Layer {
 public:
  // Collective.
  Layer(int& argc, char**& argv);
  // Collective: ends the team (rank 0), gives the shared ranges back as private memory with
  // their last contents, then the Space and the runtime.
  ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  static Layer* find();  // the process's layer, or nullptr before it starts and after it ends

  Team& team() { return *team_; }
  int rank() const { return rt_->rank(); }
  uint8_t* stack() const { return stack_mem_; }
  size_t stack_bytes() const { return stack_bytes_; }
  Schedule runtime_schedule() const { return schedule_; }
  void set_runtime_schedule(const Schedule& s) { schedule_ = s; }

 private:
  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<coherence::Space> space_;
  region::Region* data_ = nullptr;   // the program's globals
  uint8_t* stack_mem_ = nullptr;     // at one address everywhere; never unmapped (main may still run on it)
  size_t stack_bytes_ = 0;
  region::Region* stack_ = nullptr;
  std::unique_ptr<Team> team_;
  Schedule schedule_;
};

}  // namespace loom::omp
