#pragma once
// The job's lock for each OpenMP lock variable and critical-section name: a DSM lock of its own
// for every distinct address. Locks shared by several addresses (a hash onto a few) would make a
// thread that holds one and takes another wait for itself, and could order two threads' locks
// against the order the program keeps. An address claims an entry of a table of atomic words in
// a region by one CAS (whichever process comes first; every process finds the same entry), and
// each entry has a lock of a pool made at the start. Entries are never given back: a lock
// variable destroyed and made again at the same address finds its entry.
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "loom/coherence/space.hpp"

namespace loom::omp {

class NamedLocks {
 public:
  static constexpr size_t kEntries = 512;

  // Collective: the pool of locks, and the table's words in `control`.
  NamedLocks(coherence::Space& space, region::Region& control);
  // The lock of `name` (not nullptr); an error once kEntries names are in use.
  coherence::Lock& of(const void* name);

 private:
  uint32_t claim(uint64_t key);

  coherence::Space& space_;
  uint64_t* keys_ = nullptr;  // kEntries atomic words: the address that owns each entry, or 0
  std::vector<coherence::Lock> locks_;
  std::mutex mu_;
  std::unordered_map<uint64_t, uint32_t> known_;  // entries this process has found
};

}  // namespace loom::omp
