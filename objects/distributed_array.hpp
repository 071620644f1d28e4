#pragma once
// A collective distributed array (docs/objects.md, "Global pointers"): `size` elements in blocks
// of ceil(size / nprocs), block r in rank r's registered memory; element i is reached through a
// GlobalPtr from any process and through a plain pointer by its owner.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/endpoint.hpp"

namespace loom::objects {

template <typename T>
class DistributedArray {
 public:
  // Collective: every process passes the same size (checked).
  DistributedArray(Endpoint& ep, size_t size) : ep_(ep), size_(size) {
    Runtime& rt = ep.runtime();
    const auto sizes = rt.bootstrap().allgather_value(static_cast<uint64_t>(size));
    for (uint64_t s : sizes)
      if (s != size) fail("objects: DistributedArray made with ", size, " elements here and ", s, " elsewhere");
    if (size == 0) fail("objects: DistributedArray of 0 elements");
    const size_t n = static_cast<size_t>(rt.size());
    per_ = (size + n - 1) / n;
    const size_t mine = local_count(rt.rank());
    local_ = mine == 0 ? GlobalPtr<T>() : ep.allocate<T>(rt.rank(), mine);
    for (const auto& p : rt.bootstrap().allgather_value(local_)) base_.push_back(p);
  }
  // Collective: the memory goes once nobody uses it.
  ~DistributedArray() {
    ep_.runtime().bootstrap().barrier();
    ep_.deallocate(local_);
  }
  DistributedArray(const DistributedArray&) = delete;
  DistributedArray& operator=(const DistributedArray&) = delete;

  size_t size() const { return size_; }
  int owner(size_t i) const { return static_cast<int>(i / per_); }
  GlobalPtr<T> ptr(size_t i) const {
    if (i >= size_) fail("objects: element ", i, " of a DistributedArray of ", size_);
    return base_[i / per_] + static_cast<std::ptrdiff_t>(i % per_);
  }
  // This process's block: elements [first_local(), first_local() + local().size()).
  std::span<T> local() const {
    const int me = ep_.runtime().rank();
    return local_.null() ? std::span<T>() : std::span<T>(local_.local(), local_count(me));
  }
  size_t first_local() const { return std::min(size_, per_ * static_cast<size_t>(ep_.runtime().rank())); }

 private:
  size_t local_count(int rank) const {
    const size_t first = per_ * static_cast<size_t>(rank);
    return first >= size_ ? 0 : std::min(per_, size_ - first);
  }
  Endpoint& ep_;
  size_t size_;
  size_t per_ = 1;
  GlobalPtr<T> local_;
  std::vector<GlobalPtr<T>> base_;
};

}  // namespace loom::objects
