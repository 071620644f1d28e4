#pragma once
// One-sided access to every process's registered memory through global pointers (docs/objects.md,
// "Global pointers"): blocking and asynchronous gets and puts, 8-byte atomics, allocation at a
// rank. The operations are the fabric's own (READ, WRITE, FETCH_ADD, CMP_SWAP on both providers;
// nothing is emulated) and need no CPU at the target. Keys are found, not carried: the first
// operation on an address of a process asks it which registration holds the address
// (registration_at) and caches the answer (registrations live as long as the Runtime).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/objects/global_ptr.hpp"

namespace loom::objects {

class Endpoint;

// Asynchronous operations of one thread complete together: wait() on any of them completes it
// and every operation the thread started on the Endpoint before it. A Request is waited for by
// the thread that started it. A get's bytes are in place
// after wait(); a put's source may be reused as soon as it was started.
class Request {
 public:
  void wait();

 private:
  friend class Endpoint;
  Endpoint* ep_ = nullptr;
  size_t lane_ = 0;
  uint64_t ticket_ = 0;
};

class Endpoint {
 public:
  // Collective: every process makes its Endpoint (queue pairs are connected pairwise).
  explicit Endpoint(Runtime& rt);
  // Collective: completes every thread's operations, then waits for every process before the
  // queue pairs go.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  Runtime& runtime() { return rt_; }
  // Whether operations on peers' memory the provider maps (shm) are the CPU's own loads, stores
  // and atomics on the mapping (LOOM_OBJECTS_DIRECT; the provider's atomics must be the CPU's):
  // the same operations the provider would run, without a request, a completion or a lane.
  bool direct() const { return direct_; }

  template <typename T>
  T rget(GlobalPtr<T> p) {
    T v;
    get_bytes(p.rank(), p.address(), &v, sizeof(T));
    return v;
  }
  template <typename T>
  void rget(GlobalPtr<T> p, T* out, size_t n) { get_bytes(p.rank(), p.address(), out, n * sizeof(T)); }
  template <typename T>
  void rput(GlobalPtr<T> p, const T& v) { put_bytes(p.rank(), p.address(), &v, sizeof(T)); }
  template <typename T>
  void rput(GlobalPtr<T> p, const T* in, size_t n) { put_bytes(p.rank(), p.address(), in, n * sizeof(T)); }
  template <typename T>
  Request rget_async(GlobalPtr<T> p, T* out, size_t n = 1) { return get_bytes_async(p.rank(), p.address(), out, n * sizeof(T)); }
  template <typename T>
  Request rput_async(GlobalPtr<T> p, const T* in, size_t n = 1) { return put_bytes_async(p.rank(), p.address(), in, n * sizeof(T)); }
  // Completes this thread's asynchronous operations.
  void flush();

  // 8-byte atomics at the target's memory (the address 8-byte aligned). Atomic with respect to
  // other fabric atomics on the word, not to the target's own loads and stores.
  uint64_t fetch_add(GlobalPtr<uint64_t> p, uint64_t v) { return atomic(fabric::Opcode::FetchAdd, p, v, 0); }
  // Returns the old value; the swap happened iff it equals `expected`.
  uint64_t compare_swap(GlobalPtr<uint64_t> p, uint64_t expected, uint64_t desired) {
    return atomic(fabric::Opcode::CompareSwap, p, expected, desired);
  }
  // The same, asynchronous: the old value is in *old once the Request (or flush) completed.
  Request fetch_add_async(GlobalPtr<uint64_t> p, uint64_t v, uint64_t* old) {
    return atomic_async(fabric::Opcode::FetchAdd, p, v, 0, old);
  }
  Request compare_swap_async(GlobalPtr<uint64_t> p, uint64_t expected, uint64_t desired, uint64_t* old) {
    return atomic_async(fabric::Opcode::CompareSwap, p, expected, desired, old);
  }
  // A load no torn write can split (a FETCH_ADD of 0; on a mapping, the CPU's atomic load); a
  // CAS loop for a store.
  uint64_t atomic_load(GlobalPtr<uint64_t> p);
  Request atomic_load_async(GlobalPtr<uint64_t> p, uint64_t* out);
  void atomic_store(GlobalPtr<uint64_t> p, uint64_t v);

  // `n` elements of registered memory at `rank` (this process: its heap; another: a remote
  // allocation through its service thread), uninitialized.
  template <typename T>
  GlobalPtr<T> allocate(int rank, size_t n) {
    return allocate_bytes(rank, n * sizeof(T)).template as<T>();
  }
  template <typename T>
  void deallocate(GlobalPtr<T> p) { deallocate_bytes(p.template as<std::byte>()); }

  void get_bytes(int rank, uint64_t addr, void* out, size_t len);
  void put_bytes(int rank, uint64_t addr, const void* in, size_t len);
  Request get_bytes_async(int rank, uint64_t addr, void* out, size_t len);
  Request put_bytes_async(int rank, uint64_t addr, const void* in, size_t len);
  GlobalPtr<std::byte> allocate_bytes(int rank, size_t bytes);
  void deallocate_bytes(GlobalPtr<std::byte> p);

  // Key lookups that went to the owner (the rest came from the cache).
  uint64_t registration_lookups() const;
  // Operations whose registration was not the one this thread used last (a scan of the cache).
  uint64_t key_scans() const { return key_scans_.load(std::memory_order_relaxed); }

 private:
  friend class Request;
  struct Lane;
  struct Copy {
    size_t off;
    void* out;
    size_t len;
  };
  // A registration of a peer and, where the provider maps it and direct() holds, its mapping.
  struct Known {
    RemoteMemoryLocator reg;
    uint8_t* mapped = nullptr;
  };
  uint64_t atomic(fabric::Opcode op, GlobalPtr<uint64_t> p, uint64_t a, uint64_t b);
  Request atomic_async(fabric::Opcode op, GlobalPtr<uint64_t> p, uint64_t a, uint64_t b, uint64_t* old);
  // The same as requests on the calling thread's lane (memory the provider does not map here).
  [[gnu::noinline]] uint64_t atomic_fabric(fabric::Opcode op, GlobalPtr<uint64_t> p, uint32_t rkey, uint64_t a, uint64_t b);
  [[gnu::noinline]] Request atomic_fabric_async(fabric::Opcode op, GlobalPtr<uint64_t> p, uint32_t rkey, uint64_t a, uint64_t b, uint64_t* old);
  [[noreturn, gnu::cold, gnu::noinline]] static void misaligned(GlobalPtr<uint64_t> p);
  static uint64_t cpu_atomic(fabric::Opcode op, uint8_t* word, uint64_t a, uint64_t b);
  static void direct_get(void* out, const uint8_t* src, size_t len);
  static void direct_put(uint8_t* dst, const void* in, size_t len);
  // `rank`'s registration holding [addr, addr+len) (cached); checks rank and length.
  Known known_for(int rank, uint64_t addr, size_t len);
  [[noreturn, gnu::cold, gnu::noinline]] void bad_access(int rank, uint64_t addr, size_t len) const;
  [[gnu::noinline]] Known learn(int rank, uint64_t addr, size_t len);  // not the last one used: the cache, else the owner
  uint8_t* map(const RemoteMemoryLocator& reg);
  Lane& my_lane(size_t& index, std::unique_lock<std::mutex>& hold);
  // Posts [addr, addr+len) as READs (get) or WRITEs (put) in staging-sized pieces; `wait`:
  // completes them before the lane is let go.
  Request post_bytes(bool get, int rank, uint64_t addr, void* out, const void* in, size_t len, bool wait);
  [[gnu::noinline]] Request post_fabric(bool get, int rank, uint64_t addr, uint32_t rkey, void* out, const void* in, size_t len, bool wait);
  void complete(Lane& l);  // the lane held (its thread's own, or the spare's mutex)
  void complete_up_to(size_t lane, uint64_t ticket);

  Runtime& rt_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  bool direct_ = false;
  mutable std::shared_mutex keys_mu_;
  std::vector<std::vector<Known>> keys_;  // per rank, the registrations learned
  uint64_t lookups_ = 0;
  std::atomic<uint64_t> key_scans_{0};
};

}  // namespace loom::objects
