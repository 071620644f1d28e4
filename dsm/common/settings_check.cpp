#include "loom/dsm/common/settings_check.hpp"

#include <algorithm>
#include <mutex>

#include "loom/dsm/common/error.hpp"

namespace loom::settings {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<Table> tables;
  std::vector<Renamed> renamed;
};

Registry& registry() {
  static Registry r;  // built on first use: the layers register during static initialization
  return r;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substituted = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substituted});
    }
  }
  return row[b.size()];
}

const Setting* declared(std::string_view name, const std::vector<Table>& tables) {
  for (const Table& t : tables)
    for (const Setting* s : t.settings)
      if (name == s->name) return s;
  return nullptr;
}

}  // namespace

bool register_table(const Table& t) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const auto same = [&](const Table& u) { return std::string_view(u.layer) == t.layer; };
  if (std::none_of(r.tables.begin(), r.tables.end(), same)) r.tables.push_back(t);
  return true;
}

std::vector<Table> registered_tables() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.tables;
}

bool register_renamed(std::span<const Renamed> names) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const Renamed& n : names)
    if (std::none_of(r.renamed.begin(), r.renamed.end(), [&](const Renamed& m) { return std::string_view(m.old_name) == n.old_name; }))
      r.renamed.push_back(n);
  return true;
}

std::vector<Renamed> registered_renamed() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.renamed;
}

bool script_variable(std::string_view name) { return name.starts_with("LOOM_VM_") || name == "LOOM_TEST_CONFIGS"; }

std::string nearest_name(std::string_view name, const std::vector<Table>& tables) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const Table& t : tables)
    for (const Setting* s : t.settings)
      if (const size_t d = edit_distance(name, s->name); d < best_distance) best = s->name, best_distance = d;
  return best;
}

std::vector<std::string> check_environment(const std::vector<std::pair<std::string, std::string>>& env,
                                           const std::vector<Table>& tables, const std::vector<Renamed>& renamed) {
  std::vector<std::string> warnings;
  for (const auto& [name, value] : env) {
    for (const Renamed& r : renamed)
      if (name == r.old_name) fail(name, " was renamed ", r.new_name, ": set that instead (docs/environment.md)");
    if (const Setting* s = declared(name, tables)) {
      if (!value.empty()) validate(*s, value);  // an empty value counts as unset (raw())
    } else if (!script_variable(name)) {
      const std::string near = nearest_name(name, tables);
      warnings.push_back(name + " is not a setting of this program" + (near.empty() ? "" : "; the nearest is " + near) +
                         " (docs/environment.md lists them)");
    }
  }
  return warnings;
}

}  // namespace loom::settings
