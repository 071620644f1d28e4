#include "loom/mcts_shared_tree/hex.hpp"

#include <bit>
#include <cctype>
#include <cstring>
#include <sstream>

#include "loom/dsm/common/error.hpp"

namespace loom::mcts {

std::string_view name(HexPlayout p) { return p == HexPlayout::Bridge ? "bridge" : "uniform"; }

HexPlayout parse_hex_playout(std::string_view s) {
  if (s == "uniform") return HexPlayout::Uniform;
  if (s == "bridge") return HexPlayout::Bridge;
  fail("hex: playout policy '", s, "' is not uniform or bridge");
}

Hex::Hex(int n, HexPlayout playout) : n_(n), playout_(playout) {
  if (n < kMinN || n > kMaxN) fail("hex: board size ", n, " is not in ", kMinN, "..", kMaxN);
  static constexpr int dr[6] = {-1, -1, 0, 1, 1, 0}, dc[6] = {0, 1, 1, 0, -1, -1};
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c)
      for (int d = 0; d < 6; ++d) {
        const int rr = r + dr[d], cc = c + dc[d];
        const bool off_rows = rr < 0 || rr >= n, off_cols = cc < 0 || cc >= n;
        neighbours_[(r * n + c) * 6 + d] = static_cast<uint16_t>(off_rows && off_cols ? no_cell()
                                                                 : off_rows            ? black_edge()
                                                                 : off_cols            ? white_edge()
                                                                                       : rr * n + cc);
      }
}

Hex::State Hex::initial() const {
  State s;
  std::memset(&s, 0, sizeof s);
  s.n = static_cast<uint8_t>(n_);
  return s;
}

bool Hex::valid(const State& s) const {
  if (s.n != n_ || s.mover > 1) return false;
  const uint32_t row_mask = (1u << n_) - 1;
  int stones = 0;
  for (int r = 0; r < kMaxN; ++r) {
    const uint32_t b = s.stones[0][r], w = s.stones[1][r];
    if ((b & w) != 0 || (r < n_ ? ((b | w) & ~row_mask) != 0 : (b | w) != 0)) return false;
    stones += std::popcount(b) + std::popcount(w);
  }
  return stones == s.placed;
}

int Hex::legal_moves(const State& s, Move* out) const {
  int k = 0;
  for (int r = 0; r < n_; ++r)
    for (uint32_t e = ~(s.stones[0][r] | s.stones[1][r]) & full(); e != 0; e &= e - 1)
      out[k++] = static_cast<Move>(r * n_ + __builtin_ctz(e));
  return k;
}

namespace {
// The run-closure of v within the row's stones s: cells of s joined to v along the row.
inline uint32_t close_row(uint32_t v, uint32_t s) {
  for (;;) {
    const uint32_t u = v | (((v << 1) | (v >> 1)) & s);
    if (u == v) return v;
    v = u;
  }
}
}  // namespace

// A flood fill over row masks: from row r, cell c reaches row r+1 at c-1 and c (x | x >> 1) and
// row r-1 at c and c+1 (x | x << 1). Sweeps down and up until nothing changes.
bool Hex::connects(const uint32_t* rows, bool top_bottom) const {
  uint32_t reach[kMaxN];
  const uint32_t edge = 1u << (n_ - 1);
  for (int r = 0; r < n_; ++r) reach[r] = close_row(top_bottom ? (r == 0 ? rows[0] : 0u) : (rows[r] & 1u), rows[r]);
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 1; r < n_; ++r) {
      const uint32_t v = reach[r] | ((reach[r - 1] | (reach[r - 1] >> 1)) & rows[r]);
      if (v != reach[r]) reach[r] = close_row(v, rows[r]), changed = true;
    }
    if (top_bottom && reach[n_ - 1] != 0) return true;
    for (int r = n_ - 2; r >= 0; --r) {
      const uint32_t v = reach[r] | ((reach[r + 1] | (reach[r + 1] << 1)) & rows[r] & full());
      if (v != reach[r]) reach[r] = close_row(v, rows[r]), changed = true;
    }
  }
  if (top_bottom) return reach[n_ - 1] != 0;
  for (int r = 0; r < n_; ++r)
    if (reach[r] & edge) return true;
  return false;
}

// The side to move places ceil(m/2) of the m empty cells, the other the rest: a partial
// Fisher-Yates shuffle picks Black's share; only Black's stones are needed to decide.
int Hex::uniform_playout(State& s, Rng& rng) const {
  Move cells[kMaxN * kMaxN];
  const int m = legal_moves(s, cells);
  const int black = to_move(s) == 0 ? (m + 1) / 2 : m / 2;
  for (int i = 0; i < black; ++i) {
    const int j = i + static_cast<int>(rng.below(static_cast<uint32_t>(m - i)));
    const Move c = cells[j];
    cells[j] = cells[i];
    s.stones[0][c / n_] |= 1u << (c % n_);
  }
  for (int r = 0; r < n_; ++r) s.stones[1][r] |= full() & ~s.stones[0][r];
  s.placed = static_cast<uint16_t>(n_ * n_);
  return connects(s.stones[0], true) ? 0 : 1;
}

uint64_t Hex::hash(const State& s) const {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(n_);
  for (int p = 0; p < 2; ++p)
    for (int r = 0; r < n_; ++r) {
      h ^= (static_cast<uint64_t>(s.stones[p][r]) << (p * 32)) + 0x632be59bd9b4e019ULL * static_cast<uint64_t>(r + 1);
      h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL;
    }
  h ^= static_cast<uint64_t>(s.mover) * 0x94d049bb133111ebULL;
  return h ^ (h >> 32);
}

std::string Hex::move_name(Move m) const { return std::string(1, static_cast<char>('a' + m % n_)) + std::to_string(m / n_ + 1); }

std::optional<Hex::Move> Hex::parse_move(std::string_view t) const {
  if (t.size() < 2 || t.size() > 3 || !std::isalpha(static_cast<unsigned char>(t[0]))) return std::nullopt;
  const int c = std::tolower(static_cast<unsigned char>(t[0])) - 'a';
  int r = 0;
  for (char ch : t.substr(1)) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
    r = r * 10 + (ch - '0');
  }
  if (c < 0 || c >= n_ || r < 1 || r > n_) return std::nullopt;
  return static_cast<Move>((r - 1) * n_ + c);
}

std::string Hex::show(const State& s) const {
  std::ostringstream o;
  o << "  ";
  for (int c = 0; c < n_; ++c) o << ' ' << static_cast<char>('a' + c) << ' ';
  o << '\n';
  for (int r = 0; r < n_; ++r) {
    o << std::string(static_cast<size_t>(r), ' ') << (r + 1 < 10 ? " " : "") << r + 1;
    for (int c = 0; c < n_; ++c) o << ' ' << (s.stones[0][r] >> c & 1u ? 'X' : s.stones[1][r] >> c & 1u ? 'O' : '.') << ' ';
    o << '\n';
  }
  return o.str();
}

}  // namespace loom::mcts
