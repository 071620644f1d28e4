#pragma once
// loom-hex's engine (docs/mcts.md, "Playing against it"): Hex over the text protocol of Go and
// Hex engines (GTP), as HexGui and match drivers speak it. A command is a line
//
//   [id] name [arguments]        -> "=[id] result" or "?[id] error", then an empty line
//
// with name, version, protocol_version, known_command, list_commands, boardsize N [N],
// clear_board, play COLOR CELL, genmove COLOR, showboard, undo, quit, and the extension
// loom-budget rollouts N | seconds S (the budget of each genmove). COLOR is b/black or
// w/white (Black moves first and connects top to bottom); CELL is column letter + row number.
// `play` takes either colour in any order (controllers set up positions that way); the side to
// move is the other colour of the last stone placed, or the colour of the last genmove.
//
// Every process runs every command (rank 0 reads them and shares each line): the state is
// replicated, and a genmove is one collective search under the engine's tree policy. A refused
// command changes nothing.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/search.hpp"

namespace loom {
class Runtime;
}

namespace loom::mcts {

struct EngineOptions {
  TreePolicy policy = TreePolicy::Local;
  SearchConfig search;
  Budget budget{0, 1.0};  // per genmove
  int board = 11;
  HexPlayout playout = HexPlayout::Uniform;
  bool quiet = false;  // no progress lines on stderr
};

struct Reply {
  bool ok = true;
  std::string id;    // the command's number, echoed
  std::string text;  // the result or the error
  std::string framed() const;  // "=id text\n\n" or "?id text\n\n"
};

class HexEngine {
 public:
  // Collective when the policy is distributed (`ctx` for owner-invoked and cached-shared).
  HexEngine(EngineOptions o, Runtime& rt, objects::Context* ctx);
  ~HexEngine();
  // One command line; every process passes the same lines in the same order. Lines without a
  // command (blank, or a comment) get no reply in GTP: callers skip them (is_command).
  Reply execute(std::string_view line);
  static bool is_command(std::string_view line);
  bool finished() const { return quit_; }
  const Hex& game() const { return *game_; }
  const Hex::State& position() const { return history_.back(); }

 private:
  Reply dispatch(const std::string& name, const std::vector<std::string>& args);
  Reply boardsize(const std::vector<std::string>& args);
  Reply play(const std::vector<std::string>& args);
  Reply genmove(const std::vector<std::string>& args);
  Reply budget(const std::vector<std::string>& args);
  void new_game(int n);
  int color_arg(const std::string& a) const;  // 0, 1 or -1
  int choose_move(const Hex::State& position);  // collective; rank 0's choice, everywhere

  EngineOptions o_;
  Runtime& rt_;
  objects::Context* ctx_;
  std::unique_ptr<Hex> game_;
  std::unique_ptr<Search<Hex>> search_;
  std::vector<Hex::State> history_;
  bool quit_ = false;
};

// Rank 0 reads lines from `in` until quit or end of input, shares each with every process,
// and writes the replies to `out` (flushed per reply). Collective.
void serve_gtp(HexEngine& engine, Runtime& rt, std::istream& in, std::ostream& out);

}  // namespace loom::mcts
