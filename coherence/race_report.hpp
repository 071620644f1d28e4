#pragma once
// The data-race report of the checking mode (LOOM_CHECK): two processes wrote the same bytes of a
// block in one interval, which the multiple-writer merge sees when the second one's diff goes
// over the first one's version (diff.hpp, conflicting_writes). On one machine such writes are
// the program's own race; on the DSM the merge keeps the later releaser's bytes.
#include <cstddef>
#include <string>

namespace loom::coherence {

// What an address is, for a message: the symbol that holds it and the offset into it (from the
// object's dynamic symbols, else its full symbol table), else the object and the offset from its
// base, else the bare address.
std::string describe_address(const void* p);

// The report's text for `bytes` bytes from `at` that this process and another wrote.
std::string race_message(const void* at, size_t bytes);

}  // namespace loom::coherence
