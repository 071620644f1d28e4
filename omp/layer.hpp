#pragma once
// The OpenMP layer in one process of the job: the runtime, the Space, the program's globals
// shared in place, the stack rank 0's main runs on (shared, so the argument blocks the compiler
// builds in the master's frames are readable everywhere), the team, and the schedule
// `schedule(runtime)` takes. Made in two steps by the process start (start.cpp): before the
// program's global constructors (so what they allocate comes from the shared heap), and after
// them (the globals shared, holding rank 0's bytes); ended collectively when the program ends.
#include <memory>

#include "loom/coherence/space.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/omp/inline_atomics.hpp"
#include "loom/omp/schedule.hpp"
#include "loom/omp/shared_heap.hpp"
#include "loom/omp/team.hpp"

namespace loom::omp {

class Layer : private AtomicRouter {
 public:
  // Collective (with_heap the same everywhere): the runtime, the Space, the master's stack and,
  // with with_heap, the shared heap.
  Layer(int& argc, char**& argv, bool with_heap);
  // Collective, once the program's global constructors have run: the globals shared in place
  // with rank 0's bytes (the blocks that differ elsewhere are replaced), the team, the program's
  // atomics replaced. find() returns the layer from here on.
  void share_program();
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
  // The shared heap (omp/malloc.cpp hands it to the program), or nullptr. It outlives the layer:
  // blocks the program still holds after the end are freed into it.
  SharedHeap* heap() const { return heap_; }
  Schedule runtime_schedule() const { return schedule_; }
  void set_runtime_schedule(const Schedule& s) { schedule_ = s; }

 private:
  // AtomicRouter: the program's inline atomics on region memory take the team's atomic locks.
  bool shared(uintptr_t address) override;
  void lock(uintptr_t address) override;
  void unlock(uintptr_t address) override;
  void fence() override;
  void replace_atomics();
  void make_heap();

  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<coherence::Space> space_;
  region::Region* data_ = nullptr;   // the program's globals
  uint8_t* stack_mem_ = nullptr;     // at one address everywhere; never unmapped (main may still run on it)
  size_t stack_bytes_ = 0;
  region::Region* stack_ = nullptr;
  uint8_t* heap_mem_ = nullptr;      // at one address everywhere; private memory after the end
  size_t heap_bytes_ = 0;
  region::Region* heap_region_ = nullptr;
  SharedHeap* heap_ = nullptr;       // never deleted (see heap())
  std::unique_ptr<Team> team_;
  Schedule schedule_;
};

}  // namespace loom::omp
