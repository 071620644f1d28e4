#pragma once
// A global pointer: a rank and an address in that process's registered memory (seed 001's
// "global pointer"; BCL's GlobalPtr). It carries no key: the Endpoint finds the registration
// that holds the address (and caches it) when an operation goes through it.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace loom::objects {

template <typename T>
class GlobalPtr {
 public:
  static_assert(std::is_trivially_copyable_v<T>, "GlobalPtr<T>: T travels as bytes, so it must be trivially copyable");

  constexpr GlobalPtr() = default;
  constexpr GlobalPtr(int rank, uint64_t addr) : rank_(rank), addr_(addr) {}

  constexpr int rank() const { return rank_; }
  constexpr uint64_t address() const { return addr_; }
  constexpr bool null() const { return rank_ < 0; }
  constexpr explicit operator bool() const { return !null(); }

  constexpr GlobalPtr operator+(std::ptrdiff_t k) const { return {rank_, addr_ + static_cast<uint64_t>(k) * sizeof(T)}; }
  constexpr GlobalPtr operator-(std::ptrdiff_t k) const { return {rank_, addr_ - static_cast<uint64_t>(k) * sizeof(T)}; }
  constexpr GlobalPtr& operator+=(std::ptrdiff_t k) { return *this = *this + k; }
  constexpr GlobalPtr& operator-=(std::ptrdiff_t k) { return *this = *this - k; }
  constexpr GlobalPtr& operator++() { return *this += 1; }
  constexpr GlobalPtr& operator--() { return *this -= 1; }
  // Elements between two pointers into the same process's memory.
  constexpr std::ptrdiff_t operator-(const GlobalPtr& o) const {
    return static_cast<std::ptrdiff_t>(addr_ - o.addr_) / static_cast<std::ptrdiff_t>(sizeof(T));
  }
  constexpr auto operator<=>(const GlobalPtr&) const = default;

  // The same address as another element type (bytes, a field).
  template <typename U>
  constexpr GlobalPtr<U> as() const { return {rank_, addr_}; }
  // This process's own memory: the local address (rank must be the caller's).
  T* local() const { return reinterpret_cast<T*>(addr_); }

 private:
  int rank_ = -1;
  uint64_t addr_ = 0;
};

}  // namespace loom::objects
