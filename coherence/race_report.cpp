#include "loom/coherence/race_report.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>

namespace loom::coherence {
namespace {

// A file mapped read-only for as long as the object lives.
struct MappedFile {
  const uint8_t* data = nullptr;
  size_t size = 0;
  explicit MappedFile(const char* path) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) data = static_cast<const uint8_t*>(p), size = static_cast<size_t>(st.st_size);
    }
    close(fd);
  }
  ~MappedFile() {
    if (data != nullptr) munmap(const_cast<uint8_t*>(data), size);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  bool holds(uint64_t off, uint64_t n) const { return off <= size && n <= size - off; }
};

// The symbol of the ELF file's full table (.symtab) holding `value` (an address as the file
// numbers them), with the offset into it; nullopt when the file has none.
std::optional<std::string> symtab_name(const MappedFile& f, uint64_t value) {
  if (!f.holds(0, sizeof(ElfW(Ehdr))) || std::memcmp(f.data, ELFMAG, SELFMAG) != 0) return std::nullopt;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(f.data);
  if (eh->e_shentsize != sizeof(ElfW(Shdr)) || !f.holds(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr)))) return std::nullopt;
  const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(f.data + eh->e_shoff);
  for (size_t i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum || sh[i].sh_entsize != sizeof(ElfW(Sym))) continue;
    const ElfW(Shdr)& strs = sh[sh[i].sh_link];
    if (!f.holds(sh[i].sh_offset, sh[i].sh_size) || !f.holds(strs.sh_offset, strs.sh_size)) return std::nullopt;
    const auto* syms = reinterpret_cast<const ElfW(Sym)*>(f.data + sh[i].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(ElfW(Sym)); ++k) {
      const ElfW(Sym)& s = syms[k];
      if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || value < s.st_value || value - s.st_value >= s.st_size) continue;
      if (s.st_name >= strs.sh_size) return std::nullopt;
      const char* name = reinterpret_cast<const char*>(f.data + strs.sh_offset + s.st_name);
      const size_t len = strnlen(name, strs.sh_size - s.st_name);
      return std::string(name, len) + "+" + std::to_string(value - s.st_value);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string describe_address(const void* p) {
  char bare[32];
  std::snprintf(bare, sizeof bare, "%p", p);
  Dl_info info{};
  if (dladdr(p, &info) == 0 || info.dli_fname == nullptr) return bare;
  const auto at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  if (info.dli_sname != nullptr && info.dli_saddr != nullptr)
    return std::string(bare) + " (" + info.dli_sname + "+" + std::to_string(at - reinterpret_cast<uintptr_t>(info.dli_saddr)) + ")";
  // The executable is named "" by the dynamic linker; its symbols are numbered from 0 when it is
  // position-independent, from its load address otherwise.
  const char* path = info.dli_fname[0] != '\0' ? info.dli_fname : "/proc/self/exe";
  const MappedFile file(path);
  const auto* eh = file.holds(0, sizeof(ElfW(Ehdr))) ? reinterpret_cast<const ElfW(Ehdr)*>(file.data) : nullptr;
  const uint64_t value = eh != nullptr && eh->e_type == ET_EXEC ? at : at - base;
  if (auto name = symtab_name(file, value)) return std::string(bare) + " (" + *name + ")";
  char off[32];
  std::snprintf(off, sizeof off, "+%#lx", static_cast<unsigned long>(at - base));
  return std::string(bare) + " (" + (info.dli_fname[0] != '\0' ? info.dli_fname : "the executable") + off + ")";
}

std::string race_message(const void* at, size_t bytes) {
  return "coherence: data race: this process and another wrote " + std::to_string(bytes) + " byte(s) of one block from " +
         describe_address(at) +
         " in one interval, without synchronization between the writes; the merge keeps this process's bytes";
}

}  // namespace loom::coherence
