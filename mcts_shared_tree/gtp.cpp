#include "loom/mcts_shared_tree/gtp.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <istream>
#include <ostream>
#include <sstream>

#include "loom/dsm/runtime/runtime.hpp"
#include "loom/mcts_shared_tree/policies.hpp"

namespace loom::mcts {

namespace {

constexpr const char* kCommands[] = {"boardsize", "clear_board", "genmove", "known_command", "list_commands", "loom-budget",
                                     "name", "play", "protocol_version", "quit", "showboard", "undo", "version"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The words of a command line without its comment; control characters are spaces (GTP 2).
std::vector<std::string> words(std::string_view line) {
  if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  std::vector<std::string> out;
  std::string w;
  for (char c : line) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 127) {
      if (!w.empty()) out.push_back(std::move(w)), w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

Reply ok(std::string text = {}) { return Reply{true, {}, std::move(text)}; }
Reply error(std::string text) { return Reply{false, {}, std::move(text)}; }

void print_progress(const Hex& g, const Progress& p) {
  const auto best = std::max_element(p.root.begin(), p.root.end(), [](const RootEdge& a, const RootEdge& b) { return a.visits < b.visits; });
  std::string move = "-";
  double rate = 0;
  if (best != p.root.end() && best->visits != 0) move = g.move_name(best->move), rate = static_cast<double>(best->wins) / static_cast<double>(best->visits);
  std::fprintf(stderr, "loom-hex: %.1f s  %llu rollouts  %.0f/s  best %s (%.1f%%)  depth %llu\n", p.seconds,
               static_cast<unsigned long long>(p.rollouts), static_cast<double>(p.rollouts) / std::max(p.seconds, 1e-9), move.c_str(),
               100 * rate, static_cast<unsigned long long>(p.max_depth));
}

}  // namespace

std::string Reply::framed() const { return (ok ? "=" : "?") + id + (text.empty() ? "" : " " + text) + "\n\n"; }

HexEngine::HexEngine(EngineOptions o, Runtime& rt, objects::Context* ctx) : o_(o), rt_(rt), ctx_(ctx) {
  if (o_.board < Hex::kMinN || o_.board > Hex::kMaxN) fail("loom-hex: board size ", o_.board, " is outside ", Hex::kMinN, "..", Hex::kMaxN);
  new_game(o_.board);
}

HexEngine::~HexEngine() = default;

// A new board of size n: the game, and a search over it (collective for distributed policies).
void HexEngine::new_game(int n) {
  search_.reset();
  game_ = std::make_unique<Hex>(n, o_.playout);
  search_ = make_search(o_.policy, *game_, o_.search, ctx_, &rt_);
  if (rt_.rank() == 0 && !o_.quiet) search_->set_progress([g = game_.get()](const Progress& p) { print_progress(*g, p); });
  history_.assign(1, game_->initial());
}

bool HexEngine::is_command(std::string_view line) { return !words(line).empty(); }

Reply HexEngine::execute(std::string_view line) {
  std::vector<std::string> w = words(line);
  std::string id;
  if (!w.empty() && all_digits(w[0])) id = w[0], w.erase(w.begin());
  Reply r = w.empty() ? error("no command") : dispatch(lower(w[0]), std::vector<std::string>(w.begin() + 1, w.end()));
  r.id = id;
  return r;
}

Reply HexEngine::dispatch(const std::string& name, const std::vector<std::string>& args) {
  if (name == "protocol_version") return ok("2");
  if (name == "name") return ok("loom-hex");
  if (name == "version") return ok(std::string("0.1 (") + std::string(mcts::name(o_.policy)) + ", " + std::to_string(rt_.size()) + " processes)");
  if (name == "known_command") return ok(args.size() == 1 && std::find(std::begin(kCommands), std::end(kCommands), lower(args[0])) != std::end(kCommands) ? "true" : "false");
  if (name == "list_commands") {
    std::string all;
    for (const char* c : kCommands) all += (all.empty() ? "" : "\n") + std::string(c);
    return ok(all);
  }
  if (name == "quit") return quit_ = true, ok();
  if (name == "boardsize") return boardsize(args);
  if (name == "clear_board") return history_.assign(1, game_->initial()), ok();
  if (name == "showboard") {  // no empty line inside a reply: the board's last newline goes
    std::string board = game_->show(position());
    if (!board.empty() && board.back() == '\n') board.pop_back();
    return ok("\n" + board);
  }
  if (name == "undo") {
    if (history_.size() == 1) return error("cannot undo");
    return history_.pop_back(), ok();
  }
  if (name == "play") return play(args);
  if (name == "genmove") return genmove(args);
  if (name == "loom-budget") return budget(args);
  return error("unknown command");
}

Reply HexEngine::boardsize(const std::vector<std::string>& args) {
  // HexGui sends "boardsize N N" (rows and columns); square boards only.
  if (args.empty() || args.size() > 2 || !all_digits(args[0]) || (args.size() == 2 && args[1] != args[0])) return error("boardsize needs one size N (or N N)");
  int n = 0;
  std::from_chars(args[0].data(), args[0].data() + args[0].size(), n);
  if (args[0].size() > 2 || n < Hex::kMinN || n > Hex::kMaxN) return error("unacceptable size");
  if (n != game_->size()) new_game(n);
  else history_.assign(1, game_->initial());
  return ok();
}

int HexEngine::color_arg(const std::string& a) const {
  const std::string c = lower(a);
  if (c == "b" || c == "black") return 0;
  if (c == "w" || c == "white") return 1;
  return -1;
}

Reply HexEngine::play(const std::vector<std::string>& args) {
  if (args.size() != 2) return error("play needs a color and a cell");
  const int color = color_arg(args[0]);
  if (color < 0) return error("invalid color '" + args[0] + "'");
  const Hex::State& s = position();
  if (game_->winner(s) >= 0) return error("illegal move: the game is over");
  const std::optional<Hex::Move> m = game_->parse_move(args[1]);
  if (!m) return error("illegal move: '" + args[1] + "' is not a cell of the board");
  if (!game_->empty(s, *m)) return error("illegal move: " + args[1] + " is occupied");
  Hex::State next = s;
  game_->place(next, color, *m);  // either colour: GTP sets up positions by play in any order
  history_.push_back(next);
  return ok();
}

Reply HexEngine::genmove(const std::vector<std::string>& args) {
  if (args.size() != 1) return error("genmove needs a color");
  const int color = color_arg(args[0]);
  if (color < 0) return error("invalid color '" + args[0] + "'");
  const Hex::State& s = position();
  if (game_->winner(s) >= 0) return ok("resign");  // the game is over: nothing to play
  Hex::State here = s;
  game_->set_to_move(here, color);  // genmove's colour moves, whoever placed the last stone
  const int m = choose_move(here);
  if (m < 0) return error("no move found");
  Hex::State next = here;
  game_->play(next, static_cast<Hex::Move>(m));
  history_.push_back(next);
  return ok(game_->move_name(static_cast<Hex::Move>(m)));
}

// The policy's search (local: rank 0's alone), and rank 0's answer shared with everyone.
int HexEngine::choose_move(const Hex::State& position) {
  int best = -1;
  if (o_.policy != TreePolicy::Local || rt_.rank() == 0) best = search_->run(position, o_.budget).best;
  return rt_.bootstrap().allgather_value(best)[0];
}

Reply HexEngine::budget(const std::vector<std::string>& args) {
  if (args.size() != 2) return error("loom-budget needs 'rollouts N' or 'seconds S'");
  const std::string kind = lower(args[0]);
  char* end = nullptr;
  const double v = std::strtod(args[1].c_str(), &end);
  if (end == args[1].c_str() || *end != '\0' || !std::isfinite(v) || v <= 0) return error("loom-budget: '" + args[1] + "' is not a positive number");
  if (kind == "rollouts") {
    if (v > 1e12 || v != std::floor(v)) return error("loom-budget: rollouts must be a whole number up to 10^12");
    o_.budget = Budget{static_cast<uint64_t>(v), 0};
  } else if (kind == "seconds") {
    if (v > 86400) return error("loom-budget: at most 86400 seconds a move");
    o_.budget = Budget{0, v};
  } else {
    return error("loom-budget: 'rollouts' or 'seconds', not '" + args[0] + "'");
  }
  return ok();
}

void serve_gtp(HexEngine& engine, Runtime& rt, std::istream& in, std::ostream& out) {
  while (!engine.finished()) {
    std::string line;
    int more = 1;
    if (rt.rank() == 0) more = std::getline(in, line) ? 1 : 0;
    // Rank 0's line (or its end of input) for everyone.
    std::vector<std::byte> mine(line.size() + 1);
    mine[0] = static_cast<std::byte>(more);
    std::memcpy(mine.data() + 1, line.data(), line.size());
    const std::vector<std::byte> shared = rt.bootstrap().allgather(mine)[0];
    if (shared.empty() || shared[0] == std::byte{0}) break;
    line.assign(reinterpret_cast<const char*>(shared.data() + 1), shared.size() - 1);
    if (!HexEngine::is_command(line)) continue;
    const Reply r = engine.execute(line);
    if (rt.rank() == 0) out << r.framed() << std::flush;
  }
}

}  // namespace loom::mcts
