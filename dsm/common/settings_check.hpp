#pragma once
// Every LOOM_* variable in the environment, checked when a Runtime starts: a value that a
// declared setting refuses is an error whether or not this run reads it, and a name that no
// settings table of this program declares is a warning naming the nearest declared one (a
// mistyped setting would otherwise be ignored in silence). Each layer's settings header
// registers its table when it is included (`kRegistered` beside each `kTable`), so the check
// knows the settings of the layers linked into the program and no others.
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/dsm/common/settings.hpp"

namespace loom::settings {

// Adds a table to the program's registry (once per layer name); returns true.
bool register_table(const Table& t);
std::vector<Table> registered_tables();

// A setting's former name: refused, with an error that names the new one.
struct Renamed {
  const char* old_name;
  const char* new_name;
};
bool register_renamed(std::span<const Renamed> names);
std::vector<Renamed> registered_renamed();

// Names that Loom's scripts read and its programs do not (the VM harness's LOOM_VM_*,
// scripts/test.sh's LOOM_TEST_CONFIGS): they pass through a program's environment unwarned.
bool script_variable(std::string_view name);

// The declared name closest to `name` by edit distance (ties: the first in table order);
// empty when `tables` declare nothing.
std::string nearest_name(std::string_view name, const std::vector<Table>& tables);

// Checks each variable of `env` against `tables`: throws Error (naming the variable and what
// it accepts) for the first declared setting whose value is refused, and for a former name of a
// setting (naming the new one); returns one warning for each name that is neither declared nor
// a script's.
std::vector<std::string> check_environment(const std::vector<std::pair<std::string, std::string>>& env,
                                           const std::vector<Table>& tables, const std::vector<Renamed>& renamed = {});

}  // namespace loom::settings
