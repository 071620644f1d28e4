#include "loom/omp/program_data.hpp"

#include <unistd.h>

#include <algorithm>

namespace loom::omp {

std::optional<PageRange> writable_data(std::span<const ElfW(Phdr)> phdrs, uintptr_t base, size_t page) {
  const ElfW(Phdr)* rw = nullptr;
  const ElfW(Phdr)* relro = nullptr;
  for (const ElfW(Phdr)& ph : phdrs) {
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) != 0) {
      if (rw != nullptr) return std::nullopt;  // a layout this layer does not know
      rw = &ph;
    }
    if (ph.p_type == PT_GNU_RELRO) relro = &ph;
  }
  if (rw == nullptr || rw->p_memsz == 0) return std::nullopt;
  uintptr_t start = base + rw->p_vaddr, end = start + rw->p_memsz;
  if (relro != nullptr) {
    const uintptr_t relro_start = base + relro->p_vaddr, relro_end = relro_start + relro->p_memsz;
    // RELRO is the segment's prefix, which the linker ends on a page boundary.
    if (relro_start <= start && relro_end > start) start = std::max(start, relro_end);
  }
  // Without RELRO the first page also holds the GOT's end: relocated alike in every process of
  // one layout and, bound at load (the layer's link line has -z now), never written again.
  start = start / page * page;
  end = (end + page - 1) / page * page;
  if (start >= end) return std::nullopt;
  return PageRange{start, end};
}

std::optional<PageRange> program_data() {
  struct Found {
    bool seen = false;
    std::optional<PageRange> range;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) -> int {
        auto* f = static_cast<Found*>(arg);
        if (f->seen) return 1;
        f->seen = true;  // the first object listed is the executable
        f->range = writable_data(std::span<const ElfW(Phdr)>(info->dlpi_phdr, info->dlpi_phnum), info->dlpi_addr,
                                 static_cast<size_t>(sysconf(_SC_PAGESIZE)));
        return 1;
      },
      &found);
  return found.range;
}

std::vector<PageRange> program_code() {
  std::vector<PageRange> code;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) -> int {
        auto* out = static_cast<std::vector<PageRange>*>(arg);
        for (size_t i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0 && ph.p_memsz > 0)
            out->push_back(PageRange{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
        }
        return 1;  // the first object listed is the executable
      },
      &code);
  return code;
}

}  // namespace loom::omp
