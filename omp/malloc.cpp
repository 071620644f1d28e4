// The program's heap: malloc and its family, and C++'s operator new and delete, as the program
// calls them. While the layer runs, memory the program's own code asks for (the caller's return
// address is in the executable) comes from the shared heap (shared_heap.hpp), so a pointer the
// master allocates in serial code reaches every thread of every process. Everything else asks
// the C library: the layer's own allocations, the C and C++ libraries' internal ones (strdup,
// fopen, std::string's growth inside libstdc++), and anything before the layer starts. A block
// is freed, resized or measured by where it is, whoever calls.
//
// Built with -fno-builtin: the compiler must not turn these into calls of themselves.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>

#include "loom/omp/abi.hpp"
#include "loom/omp/gomp.hpp"
#include "loom/omp/shared_heap.hpp"

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace loom::omp {
namespace {

std::atomic<SharedHeap*> g_heap{nullptr};     // allocations: set while the layer runs
std::atomic<SharedHeap*> g_blocks{nullptr};   // frees and sizes: set from the start on, never cleared
uintptr_t g_code_lo = 0, g_code_hi = 0;       // the executable's code, written before g_heap

// The shared heap when the caller (a return address) is the program's own code.
SharedHeap* heap_for(const void* caller) {
  SharedHeap* h = g_heap.load(std::memory_order_acquire);
  const auto a = reinterpret_cast<uintptr_t>(caller);
  return h != nullptr && a >= g_code_lo && a < g_code_hi ? h : nullptr;
}

SharedHeap* holding(const void* p) {
  SharedHeap* h = g_blocks.load(std::memory_order_acquire);
  return h != nullptr && p != nullptr && h->contains(p) ? h : nullptr;
}

void* shared_or_enomem(SharedHeap* h, size_t n, size_t align) {
  void* p = h->allocate(n, align);
  if (p == nullptr) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      char text[200];
      const int len = std::snprintf(text, sizeof text,
                                    "loom-omp: this process's slice of the shared heap (%zu bytes) cannot hold %zu bytes more; "
                                    "LOOM_OMP_HEAP sets the heap's size (docs/openmp.md)\n",
                                    h->slice_bytes(), n);
      if (len > 0) (void)!write(2, text, static_cast<size_t>(std::min(len, static_cast<int>(sizeof text) - 1)));
    }
    errno = ENOMEM;
  }
  return p;
}

void* allocate(const void* caller, size_t n, size_t align) {
  if (SharedHeap* h = heap_for(caller)) return shared_or_enomem(h, n, align);
  return align <= 16 ? __libc_malloc(n) : __libc_memalign(align, n);
}

void release(void* p) {
  if (SharedHeap* h = holding(p)) return h->free(p);
  __libc_free(p);
}

void* resize(const void* caller, void* p, size_t n) {
  if (p == nullptr) return allocate(caller, n, 16);
  SharedHeap* h = holding(p);
  if (h == nullptr) return __libc_realloc(p, n);
  if (n == 0) {
    h->free(p);
    return nullptr;
  }
  const size_t old = h->size_of(p);
  // A shared block stays shared, whoever resizes it.
  void* q = shared_or_enomem(h, n, 16);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, std::min(old, n));
  h->free(p);
  return q;
}

bool power_of_two(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

void* new_or_throw(const void* caller, size_t n, size_t align) {
  for (;;) {
    if (void* p = allocate(caller, n == 0 ? 1 : n, align)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

void start_program_heap(SharedHeap* heap, uintptr_t code_lo, uintptr_t code_hi) {
  g_code_lo = code_lo, g_code_hi = code_hi;
  g_blocks.store(heap, std::memory_order_release);
  g_heap.store(heap, std::memory_order_release);
}

void stop_program_heap() { g_heap.store(nullptr, std::memory_order_release); }

// The malloc the program's calls reach is this library's: not when a sanitizer's runtime (or
// another allocator) comes first in the lookup order.
bool program_heap_reachable() {
  Dl_info first{}, mine{};
  void* reached = dlsym(RTLD_DEFAULT, "malloc");
  return reached != nullptr && dladdr(reached, &first) != 0 && dladdr(reinterpret_cast<void*>(&heap_for), &mine) != 0 &&
         first.dli_fbase == mine.dli_fbase;
}

}  // namespace loom::omp

using loom::omp::allocate;
using loom::omp::release;

#define LOOM_CALLER __builtin_return_address(0)

LOOM_OMP_API void* malloc(size_t n) { return allocate(LOOM_CALLER, n, 16); }
LOOM_OMP_API void free(void* p) { release(p); }
LOOM_OMP_API void* realloc(void* p, size_t n) { return loom::omp::resize(LOOM_CALLER, p, n); }

LOOM_OMP_API void* calloc(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return nullptr;
  }
  if (loom::omp::heap_for(LOOM_CALLER) == nullptr) return __libc_calloc(count, size);
  void* p = allocate(LOOM_CALLER, count * size, 16);
  if (p != nullptr) std::memset(p, 0, count * size);  // a freed block may hold anything
  return p;
}

LOOM_OMP_API int posix_memalign(void** out, size_t align, size_t n) {
  if (!loom::omp::power_of_two(align) || align % sizeof(void*) != 0) return EINVAL;
  void* p = allocate(LOOM_CALLER, n, align);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

LOOM_OMP_API void* aligned_alloc(size_t align, size_t n) {
  if (!loom::omp::power_of_two(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return allocate(LOOM_CALLER, n, align);
}

LOOM_OMP_API void* memalign(size_t align, size_t n) { return allocate(LOOM_CALLER, n, loom::omp::power_of_two(align) ? align : 16); }
LOOM_OMP_API void* valloc(size_t n) { return allocate(LOOM_CALLER, n, static_cast<size_t>(sysconf(_SC_PAGESIZE))); }
LOOM_OMP_API void* pvalloc(size_t n) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return allocate(LOOM_CALLER, (n + page - 1) / page * page, page);
}

LOOM_OMP_API size_t malloc_usable_size(void* p) {
  if (p == nullptr) return 0;
  if (loom::omp::SharedHeap* h = loom::omp::holding(p)) return h->size_of(p);
  using Fn = size_t (*)(void*);
  static const auto libc = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  return libc != nullptr ? libc(p) : 0;
}

// ---- C++ ----

LOOM_OMP_CXX_API void* operator new(size_t n) { return loom::omp::new_or_throw(LOOM_CALLER, n, 16); }
LOOM_OMP_CXX_API void* operator new[](size_t n) { return loom::omp::new_or_throw(LOOM_CALLER, n, 16); }
LOOM_OMP_CXX_API void* operator new(size_t n, std::align_val_t a) { return loom::omp::new_or_throw(LOOM_CALLER, n, static_cast<size_t>(a)); }
LOOM_OMP_CXX_API void* operator new[](size_t n, std::align_val_t a) { return loom::omp::new_or_throw(LOOM_CALLER, n, static_cast<size_t>(a)); }
LOOM_OMP_CXX_API void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocate(LOOM_CALLER, n == 0 ? 1 : n, 16); }
LOOM_OMP_CXX_API void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocate(LOOM_CALLER, n == 0 ? 1 : n, 16); }
LOOM_OMP_CXX_API void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(LOOM_CALLER, n == 0 ? 1 : n, static_cast<size_t>(a));
}
LOOM_OMP_CXX_API void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(LOOM_CALLER, n == 0 ? 1 : n, static_cast<size_t>(a));
}
LOOM_OMP_CXX_API void operator delete(void* p) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete[](void* p) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete(void* p, size_t) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete[](void* p, size_t) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete(void* p, std::align_val_t) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
LOOM_OMP_CXX_API void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
