#pragma once
// Where the running program's globals and code are: the writable part of its data segment (.data and
// .bss; the part the dynamic linker makes read-only after relocation, RELRO, left out), in whole
// pages. The OpenMP layer shares this range in place so that every global is shared without
// annotations.
#include <link.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace loom::omp {

struct PageRange {
  uintptr_t start = 0, end = 0;  // page-aligned, end exclusive
  size_t bytes() const { return end - start; }
  bool operator==(const PageRange&) const = default;
};

// From an object's program headers, loaded at `base`: the writable PT_LOAD segment less its
// RELRO prefix, widened to whole pages of `page` bytes. nullopt when there is no writable
// segment, more than one, or nothing of it is left after RELRO.
std::optional<PageRange> writable_data(std::span<const ElfW(Phdr)> phdrs, uintptr_t base, size_t page);

// The running executable's (the first object the dynamic linker lists); nullopt as above.
std::optional<PageRange> program_data();

// The executable's code: its PT_LOAD segments that are executable, as mapped (not widened).
std::vector<PageRange> program_code();

}  // namespace loom::omp
