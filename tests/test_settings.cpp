// The settings registry (dsm/common/settings.hpp): every table entry documented in
// docs/environment.md and every documented variable declared; every default valid; bad values
// of every setting refused with a message naming the variable and what it accepts.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "loom/coherence/settings.hpp"
#include "loom/objects/settings.hpp"
#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/invoke/settings.hpp"
#include "loom/omp/settings.hpp"
#include "tests/test_settings_table.hpp"

using loom::settings::Setting;
using loom::settings::Table;
using loom::settings::Type;

namespace {

const Table kTables[] = {loom::settings::dsm::kTable, loom::invoke::settings::kTable, loom::coherence::settings::kTable,
                         loom::objects::settings::kTable, loom::omp::settings::kTable, loom::test_settings::kTable};

std::vector<const Setting*> all_settings() {
  std::vector<const Setting*> v;
  for (const Table& t : kTables)
    for (const Setting* s : t.settings) v.push_back(s);
  return v;
}

std::string read_doc() {
  std::ifstream f(LOOM_SOURCE_DIR "/docs/environment.md");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Reads the setting with its typed reader, as the runtime does.
void read(const Setting& s) {
  switch (s.type) {
    case Type::String: loom::settings::get_string(s); break;
    case Type::Choice: loom::settings::get_choice(s); break;
    case Type::Bool: loom::settings::get_bool(s); break;
    case Type::Int: loom::settings::get_int(s, 0); break;
    case Type::Size: loom::settings::get_size(s); break;
  }
}

// Values every setting of a type must refuse.
std::vector<std::string> bad_values(const Setting& s) {
  switch (s.type) {
    case Type::String: return {};
    case Type::Choice: return {"bogus", std::string(s.range)};
    case Type::Bool: return {"2", "maybe", "-1"};
    case Type::Int: {
      std::string r = s.range;
      std::string lo = r.substr(0, r.find("..")), hi = r.substr(r.find("..") + 2);
      return {"abc", "1x", "", " 1", std::to_string(std::stoll(lo) - 1), std::to_string(std::stoll(hi) + 1),
              "99999999999999999999", "nan"};
    }
    case Type::Size: {
      std::string r = s.range;
      uint64_t hi = loom::settings::parse_size(r.substr(r.find("..") + 2), "hi");
      return {"abc", "-1", "1T", "4X", std::to_string(hi + 1), "99999999999999999999G"};
    }
  }
  return {};
}

struct EnvGuard {
  const char* name;
  ~EnvGuard() { unsetenv(name); }
};

}  // namespace

TEST(Settings, EveryTableEntryIsDocumentedWithItsDefault) {
  const std::string doc = read_doc();
  ASSERT_FALSE(doc.empty()) << "docs/environment.md not found";
  for (const Setting* s : all_settings()) {
    std::regex row("\\| `" + std::string(s->name) + "`[^\\n]*");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(doc, m, row)) << s->name << " is not in docs/environment.md";
    std::string text = m.str();
    std::erase(text, '\\');  // Markdown escapes the choices' bars
    if (*s->fallback != '\0' && s->type != Type::String) {
      EXPECT_NE(text.find(std::string("`") + s->fallback + "`"), std::string::npos)
          << s->name << ": the documented default is not `" << s->fallback << "`";
    }
    if (s->type == Type::Int || s->type == Type::Size || s->type == Type::Choice) {
      EXPECT_NE(text.find(s->range), std::string::npos) << s->name << ": the documented row does not state " << s->range;
    }
  }
}

TEST(Settings, EveryDocumentedVariableIsDeclared) {
  const std::string doc = read_doc();
  std::set<std::string> declared;
  for (const Setting* s : all_settings()) declared.insert(s->name);
  std::regex var("`(LOOM_[A-Z0-9_]+)`");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), var); it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(declared.count((*it)[1].str())) << (*it)[1].str() << " is documented but no table declares it";
}

TEST(Settings, NamesAreUniqueAndDefaultsValid) {
  std::set<std::string> seen;
  for (const Setting* s : all_settings()) {
    EXPECT_TRUE(seen.insert(s->name).second) << s->name << " is declared twice";
    EXPECT_EQ(std::string(s->name).rfind("LOOM_", 0), 0u) << s->name;
    if (*s->fallback != '\0' || s->type == Type::String) {
      EXPECT_NO_THROW(loom::settings::validate(*s, s->fallback)) << s->name;
    } else {
      EXPECT_EQ(s->type, Type::Int) << s->name << ": only integers may have a computed default";
    }
  }
}

TEST(Settings, BadValuesOfEverySettingAreRefusedByName) {
  for (const Setting* s : all_settings()) {
    EnvGuard g{s->name};
    for (const std::string& bad : bad_values(*s)) {
      if (bad.empty()) continue;  // an empty value counts as unset
      setenv(s->name, bad.c_str(), 1);
      try {
        read(*s);
        ADD_FAILURE() << s->name << "='" << bad << "' was accepted";
      } catch (const loom::Error& e) {
        std::string what = e.what();
        EXPECT_NE(what.find(s->name), std::string::npos) << what;
        EXPECT_NE(what.find("accepted"), std::string::npos) << what;
      }
    }
  }
}

TEST(Settings, GoodValuesAreRead) {
  EnvGuard g1{"LOOM_SERVICE_MESSAGE"}, g2{"LOOM_INVOKE_DIRECT"}, g3{"LOOM_VERBS_GID_INDEX"}, g4{"LOOM_LOCAL_RANK"};
  setenv("LOOM_SERVICE_MESSAGE", "8K", 1);
  EXPECT_EQ(loom::settings::get_size(loom::settings::dsm::kServiceMessage), 8192u);
  setenv("LOOM_INVOKE_DIRECT", "off", 1);
  EXPECT_FALSE(loom::settings::get_bool(loom::invoke::settings::kDirect));
  setenv("LOOM_VERBS_GID_INDEX", "-1", 1);
  EXPECT_EQ(loom::settings::get_int(loom::settings::dsm::kVerbsGidIndex), -1);
  EXPECT_EQ(loom::settings::get_int(loom::settings::dsm::kLocalRank, 7), 7) << "unset: the computed default";
  setenv("LOOM_LOCAL_RANK", "3", 1);
  EXPECT_EQ(loom::settings::get_int(loom::settings::dsm::kLocalRank, 7), 3);
}

// Values once accepted or silently cut, each refused now.
TEST(Settings, TruncationsAndWrapsAreRefused) {
  struct Case {
    const Setting& s;
    const char* value;
  } cases[] = {
      {loom::settings::dsm::kServiceMessage, "4194308K"},  {loom::settings::dsm::kServiceBuffers, "4294967297"},
      {loom::invoke::settings::kMaxChunks, "4294967297"},  {loom::invoke::settings::kHelpers, "-1"},
      {loom::settings::dsm::kSize, "2147483648"},           {loom::invoke::settings::kDirect, "2"},
      {loom::invoke::settings::kChunks, "0"},               {loom::invoke::settings::kChunks, "-1"},
      {loom::settings::dsm::kShmRnrTimeout, "-1"},          {loom::settings::dsm::kHugePages, "abc"},
      {loom::settings::dsm::kLog, "verbose"},               {loom::settings::dsm::kSuperchunk, "1024G"},
      {loom::settings::dsm::kServiceMessage, "1G"},         {loom::coherence::settings::kReserve, "-1"},
  };
  for (const Case& c : cases) EXPECT_THROW(loom::settings::validate(c.s, c.value), loom::Error) << c.s.name << "=" << c.value;
}

// The start-up check of the environment (dsm/common/settings_check.hpp).
TEST(SettingsCheck, EveryTableThisProgramIncludesIsRegistered) {
  std::set<std::string> layers;
  for (const Table& t : loom::settings::registered_tables()) layers.insert(t.layer);
  for (const Table& t : kTables) EXPECT_TRUE(layers.count(t.layer)) << t.layer;
}

TEST(SettingsCheck, AMistypedNameIsAWarningNamingTheNearest) {
  const auto w = loom::settings::check_environment({{"LOOM_COHERENCE_POLCY", "fixed-dir"}, {"LOOM_HUGEPAGES", "0"}},
                                                   loom::settings::registered_tables());
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("LOOM_COHERENCE_POLCY is not a setting"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("nearest is LOOM_COHERENCE_POLICY"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("nearest is LOOM_HUGE_PAGES"), std::string::npos) << w[1];
}

TEST(SettingsCheck, AnInvalidValueIsAnErrorEvenWhenTheRunWouldNotReadIt) {
  try {
    loom::settings::check_environment({{"LOOM_LOG", "warn"}, {"LOOM_HUGE_PAGES", "abc"}}, loom::settings::registered_tables());
    ADD_FAILURE() << "LOOM_HUGE_PAGES=abc was accepted";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOOM_HUGE_PAGES='abc'"), std::string::npos) << e.what();
  }
}

TEST(SettingsCheck, GoodValuesEmptyValuesAndScriptVariablesPass) {
  const auto w = loom::settings::check_environment(
      {{"LOOM_LOG", "info"}, {"LOOM_HUGE_PAGES", ""}, {"LOOM_VM_ROLE", "server"}, {"LOOM_TEST_CONFIGS", "release"}},
      loom::settings::registered_tables());
  EXPECT_TRUE(w.empty()) << w.front();
}

TEST(SettingsCheck, TheNearestNameIsByEditDistance) {
  const auto tables = loom::settings::registered_tables();
  EXPECT_EQ(loom::settings::nearest_name("LOOM_RANK", tables), "LOOM_RANK");
  EXPECT_EQ(loom::settings::nearest_name("LOOM_SIZ", tables), "LOOM_SIZE");
  EXPECT_EQ(loom::settings::nearest_name("LOOM_OMP_HEAPBLOCK", tables), "LOOM_OMP_HEAP_BLOCK");
  EXPECT_EQ(loom::settings::nearest_name("LOOM_X", {}), "");
}

TEST(SettingsCheck, AFormerNameIsRefusedNamingTheNewOne) {
  try {
    loom::settings::check_environment({{"LOOM_DSM_POLICY", "fixed-dir"}}, loom::settings::registered_tables(),
                                      loom::settings::registered_renamed());
    ADD_FAILURE() << "LOOM_DSM_POLICY was accepted";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOOM_DSM_POLICY was renamed LOOM_COHERENCE_POLICY"), std::string::npos) << e.what();
  }
  for (const auto& r : loom::settings::registered_renamed()) {
    bool declared = false;
    for (const Setting* s : all_settings()) declared = declared || std::string(s->name) == r.new_name;
    EXPECT_TRUE(declared) << r.old_name << " names " << r.new_name << ", which no table declares";
  }
}
