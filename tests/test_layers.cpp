// The layer rule as a test: the "may use" table of docs/architecture.md, read as written, against
// every `#include "loom/..."` and `#include <loom/...>` of the library folders. A folder may
// include its own headers and those of the folders its row names; a part of dsm/ that
// dsm/CMakeLists.txt keeps out of the installed headers (`loom_headers(dsm EXCLUDE ...)`: the
// providers' folders, the launcher's, the PMIx bootstrap) is included only from the folder that
// holds it (the contract is that folder's own headers).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Row {
  std::string folder;  // "dsm/fabric", "coherence", ...
  std::string text;    // what the row says it may use
};

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// The table's rows in order (lower layers first), one per folder named in a row's first cell.
std::vector<Row> read_table(const std::string& doc) {
  const size_t head = doc.find("| folder | may use |");
  if (head == std::string::npos) return {};
  std::vector<Row> rows;
  std::stringstream lines(doc.substr(head));
  std::string line;
  std::getline(lines, line);  // the header
  std::getline(lines, line);  // |---|---|
  const std::regex name("`([a-z_/]+)`");
  while (std::getline(lines, line) && line.starts_with("|")) {
    const size_t bar = line.find('|', 1);
    const std::string first = line.substr(1, bar - 1), rest = line.substr(bar + 1);
    for (auto it = std::sregex_iterator(first.begin(), first.end(), name); it != std::sregex_iterator(); ++it)
      rows.push_back(Row{trim_slash((*it)[1].str()), rest});
  }
  return rows;
}

bool under(const std::string& path, const std::string& folder) { return path == folder || path.starts_with(folder + "/"); }

// What each folder may include: itself, the folders its row names (a name like `dsm/` stands for
// every row under it), "everything in `dsm/` below it" (the rows before it), "`X` and everything
// below" (X and what X may use); nullopt-like `anything` as the one entry "*".
std::map<std::string, std::set<std::string>> allowed(const std::vector<Row>& rows) {
  std::map<std::string, std::set<std::string>> out;
  const std::regex name("`([a-z_/]+)`");
  for (size_t i = 0; i < rows.size(); ++i) {
    std::set<std::string>& may = out[rows[i].folder];
    may.insert(rows[i].folder);
    const std::string& t = rows[i].text;
    if (t.find("anything") != std::string::npos) may.insert("*");
    for (auto it = std::sregex_iterator(t.begin(), t.end(), name); it != std::sregex_iterator(); ++it) {
      const std::string named = trim_slash((*it)[1].str());
      const bool below_it = t.find("everything in `" + (*it)[1].str() + "` below it") != std::string::npos;
      for (size_t j = 0; j < (below_it ? i : rows.size()); ++j)
        if (under(rows[j].folder, named)) may.insert(rows[j].folder);
      if (t.find("`" + (*it)[1].str() + "` and everything below") != std::string::npos && out.count(named))
        may.insert(out[named].begin(), out[named].end());
    }
  }
  return out;
}

// The row a repository path belongs to: the longest folder it lies under.
std::string owner(const std::string& path, const std::vector<Row>& rows) {
  std::string best;
  for (const Row& r : rows)
    if (under(path, r.folder) && r.folder.size() > best.size()) best = r.folder;
  return best;
}

// The paths under dsm/ named by `loom_headers(dsm EXCLUDE ...)` (an install PATTERN: any file or
// folder of that name), as the build keeps them private.
std::vector<std::string> private_parts(const std::string& cmake, const std::vector<std::string>& paths) {
  std::smatch m;
  if (!std::regex_search(cmake, m, std::regex(R"(loom_headers\(dsm EXCLUDE ([^)]*)\))"))) return {};
  std::set<std::string> names;
  std::stringstream words(m[1].str());
  for (std::string w; words >> w;) names.insert(w);
  std::set<std::string> parts;
  for (const std::string& p : paths) {
    fs::path prefix;
    for (const auto& c : fs::path(p)) {
      prefix /= c;
      if (names.count(c.string()) != 0) parts.insert(prefix.string());
    }
  }
  return {parts.begin(), parts.end()};
}

// The folder that may include a private part `target` lies in (its parent), or "" for a public one.
std::string private_home(const std::string& target, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    if (under(target, p)) return fs::path(p).parent_path().string();
  return "";
}

struct Include {
  std::string file, target;
};

// An include of a Loom header, in either form (the READMEs teach <loom/...>).
const std::regex& include_line() {
  static const std::regex re(R"(#include ["<]loom/([^">]+)[">])");
  return re;
}

std::vector<Include> includes_of_libraries(const fs::path& root, const std::map<std::string, std::set<std::string>>& may) {
  std::vector<Include> out;
  const std::regex& include = include_line();
  for (const auto& [folder, set] : may) {
    if (set.count("*") != 0 || !fs::exists(root / folder)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c")) continue;
      const std::string text = read(e.path()), file = fs::relative(e.path(), root).string();
      for (auto it = std::sregex_iterator(text.begin(), text.end(), include); it != std::sregex_iterator(); ++it)
        out.push_back(Include{file, (*it)[1].str()});
    }
  }
  return out;
}

class Layers : public ::testing::Test {
 protected:
  void SetUp() override {
    rows_ = read_table(read(root_ / "docs/architecture.md"));
    may_ = allowed(rows_);
    std::vector<std::string> dsm_paths;
    for (const auto& e : fs::recursive_directory_iterator(root_ / "dsm")) dsm_paths.push_back(fs::relative(e.path(), root_).string());
    private_ = private_parts(read(root_ / "dsm/CMakeLists.txt"), dsm_paths);
  }
  const fs::path root_ = LOOM_SOURCE_DIR;
  std::vector<Row> rows_;
  std::map<std::string, std::set<std::string>> may_;
  std::vector<std::string> private_;
};

TEST_F(Layers, TheTableIsReadAsWritten) {
  ASSERT_GE(rows_.size(), 12u) << "docs/architecture.md has no \"may use\" table";
  EXPECT_EQ(may_.at("dsm/common"), (std::set<std::string>{"dsm/common"}));
  EXPECT_EQ(may_.at("dsm/runtime"), (std::set<std::string>{"dsm/common", "dsm/fabric", "dsm/memory", "dsm/signal", "dsm/runtime"}));
  EXPECT_TRUE(may_.at("coherence").count("dsm/region"));
  EXPECT_FALSE(may_.at("coherence").count("invoke"));
  EXPECT_TRUE(may_.at("mcts_shared_tree").count("invoke")) << "objects/ and everything below";
  EXPECT_FALSE(may_.at("mcts_shared_tree").count("omp"));
  EXPECT_TRUE(may_.at("tests").count("*"));
  EXPECT_EQ(private_, (std::vector<std::string>{"dsm/fabric/hybrid", "dsm/fabric/shm", "dsm/fabric/verbs", "dsm/runtime/launch",
                                                "dsm/runtime/pmix_bootstrap.hpp"}));
}

TEST_F(Layers, EveryIncludeOfALibraryFolderFollowsTheTable) {
  const auto found = includes_of_libraries(root_, may_);
  ASSERT_GT(found.size(), 300u);
  for (const Include& inc : found) {
    const std::string from = owner(inc.file, rows_), to = owner(inc.target, rows_);
    if (inc.target == "version.hpp") continue;  // generated by the build for every layer
    ASSERT_FALSE(from.empty()) << inc.file << " lies in no folder of the table";
    EXPECT_FALSE(to.empty()) << inc.file << " includes loom/" << inc.target << ", in no folder of the table";
    if (to.empty()) continue;
    EXPECT_TRUE(may_.at(from).count(to)) << inc.file << " (" << from << ") includes loom/" << inc.target << " (" << to
                                         << "), which docs/architecture.md does not let it use";
    const std::string home = private_home(inc.target, private_);
    if (!home.empty()) {
      EXPECT_TRUE(under(inc.file, home)) << inc.file << " includes loom/" << inc.target << ", private to " << home;
    }
  }
}

// The checks above, on a table and includes made up for the purpose: a breach is found.
TEST(LayerRule, ABreachIsFound) {
  const std::string doc =
      "| folder | may use |\n|---|---|\n| `dsm/common` | the standard library |\n| `dsm/fabric` | `dsm/common` |\n"
      "| `dsm/runtime` | everything in `dsm/` below it |\n| `coherence/` | `dsm/` |\n| `objects/` | `coherence/` and everything below |\n\n";
  const auto rows = read_table(doc);
  const auto may = allowed(rows);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_FALSE(may.at("dsm/fabric").count("dsm/runtime"));
  EXPECT_TRUE(may.at("dsm/runtime").count("dsm/fabric"));
  EXPECT_FALSE(may.at("dsm/common").count("coherence"));
  EXPECT_TRUE(may.at("objects").count("dsm/runtime"));
  EXPECT_EQ(owner("dsm/fabric/shm/ordered_copy.hpp", rows), "dsm/fabric");
  const auto parts = private_parts("loom_headers(dsm EXCLUDE shm launch boot.hpp)",
                                   {"dsm/fabric/shm", "dsm/fabric/shm/qp.hpp", "dsm/runtime/launch/x.hpp", "dsm/runtime/boot.hpp", "dsm/fabric/fabric.hpp"});
  EXPECT_EQ(parts, (std::vector<std::string>{"dsm/fabric/shm", "dsm/runtime/boot.hpp", "dsm/runtime/launch"}));
  EXPECT_EQ(private_home("dsm/fabric/shm/qp.hpp", parts), "dsm/fabric");
  EXPECT_EQ(private_home("dsm/runtime/boot.hpp", parts), "dsm/runtime");
  EXPECT_EQ(private_home("dsm/fabric/fabric.hpp", parts), "");
  std::smatch m;
  const std::string angled = "#include <loom/dsm/fabric/fabric.hpp>";
  ASSERT_TRUE(std::regex_search(angled, m, include_line()));
  EXPECT_EQ(m[1].str(), "dsm/fabric/fabric.hpp");
}

}  // namespace
