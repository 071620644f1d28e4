#include "loom/dsm/runtime/collectives.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"

namespace loom::runtime {

namespace {

// A call on the wire: number, then kind and site, each ending in '\0'.
std::vector<std::byte> encode(const CollectiveCall& c) {
  std::vector<std::byte> out(8);
  std::memcpy(out.data(), &c.seq, 8);
  for (const std::string* s : {&c.kind, &c.where}) {
    const auto* b = reinterpret_cast<const std::byte*>(s->c_str());
    out.insert(out.end(), b, b + s->size() + 1);
  }
  return out;
}

// The bytes come from another process: every length is checked.
CollectiveCall decode(const std::vector<std::byte>& in, int rank) {
  CollectiveCall c;
  if (in.size() < 10) fail("collectives: rank ", rank, " sent ", in.size(), " bytes for its collective call");
  std::memcpy(&c.seq, in.data(), 8);
  size_t at = 8;
  for (std::string* s : {&c.kind, &c.where}) {
    auto end = std::find(in.begin() + static_cast<std::ptrdiff_t>(at), in.end(), std::byte{0});
    if (end == in.end()) fail("collectives: rank ", rank, " sent a truncated collective call");
    s->assign(reinterpret_cast<const char*>(in.data() + at), static_cast<size_t>(end - in.begin()) - at);
    at = static_cast<size_t>(end - in.begin()) + 1;
  }
  return c;
}

bool same(const CollectiveCall& a, const CollectiveCall& b) { return a.seq == b.seq && a.kind == b.kind; }

uint32_t kind_hash(const std::string& kind) {
  uint32_t h = 2166136261u;
  for (char c : kind) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h & 0xffffff;
}

}  // namespace

std::string CollectiveCall::str() const {
  std::ostringstream os;
  os << "collective call #" << seq << ", " << kind;
  if (!where.empty()) os << " at " << where;
  return os.str();
}

std::string site_of(const std::source_location& where) {
  std::string file = where.file_name();
  // The last two components name the file well enough and keep the line short.
  size_t cut = file.rfind('/');
  if (cut != std::string::npos && cut > 0) {
    size_t before = file.rfind('/', cut - 1);
    if (before != std::string::npos) file = file.substr(before + 1);
  }
  return file + ":" + std::to_string(where.line());
}

CollectiveCall Collectives::enter(const char* kind, const std::source_location& where) { return record(kind, site_of(where)); }

CollectiveCall Collectives::enter(const char* kind) { return record(kind, ""); }

CollectiveCall Collectives::note(const char* kind, const std::source_location& where) {
  std::lock_guard<std::mutex> g(mu_);
  last_ = CollectiveCall{++seq_, kind, site_of(where)};
  learn_kind(kind);
  boot_.post_collective(ticket_of(last_));
  return last_;
}

void Collectives::learn_kind(const char* kind) {
  const uint32_t h = kind_hash(kind);
  for (const auto& k : kinds_)
    if (k.first == h) return;
  kinds_.emplace_back(h, kind);
}

uint64_t Collectives::ticket_of(const CollectiveCall& c) { return c.seq << 24 | kind_hash(c.kind); }

void Collectives::check_tickets(const CollectiveCall& mine, const std::vector<uint64_t>& tickets) const {
  const uint64_t want = ticket_of(mine);
  if (std::all_of(tickets.begin(), tickets.end(), [&](uint64_t t) { return t == want; })) return;
  std::ostringstream os;
  os << "the processes' collective calls differ (a collective made by some processes only, or in another order):";
  std::lock_guard<std::mutex> g(mu_);
  for (size_t r = 0; r < tickets.size(); ++r)
    os << "\n  rank " << r << ": collective call #" << (tickets[r] >> 24) << ", " << kind_name(tickets[r], mine);
  fail(os.str());
}

void Collectives::check_ticket(const CollectiveCall& mine, int me, int peer, uint64_t ticket) const {
  const uint64_t want = ticket_of(mine);
  if (ticket == want) return;
  std::lock_guard<std::mutex> g(mu_);
  fail("the processes' collective calls differ (a collective made by some processes only, or in another order):",
       "\n  rank ", me, ": collective call #", mine.seq, ", ", kind_name(want, mine), "\n  rank ", peer,
       ": collective call #", ticket >> 24, ", ", kind_name(ticket, mine));
}

void Collectives::check_posted(const CollectiveCall& mine, int me, int peer) const {
  const uint64_t theirs = boot_.posted_collective(peer);
  if (theirs == 0 || theirs >> 24 != mine.seq) return;
  check_ticket(mine, me, peer, theirs);
}

void Collectives::check_posted_all(int me) const {
  const CollectiveCall mine = last();
  if (mine.seq == 0) return;
  for (int r = 0; r < boot_.size(); ++r)
    if (r != me) check_posted(mine, me, r);
}

std::string Collectives::kind_name(uint64_t ticket, const CollectiveCall& mine) const {
  if (ticket == ticket_of(mine)) return mine.kind + (mine.where.empty() ? "" : " at " + mine.where);
  const uint32_t h = static_cast<uint32_t>(ticket & 0xffffff);
  for (const auto& k : kinds_)
    if (k.first == h) return k.second;
  return "a collective this process never made";
}

CollectiveCall Collectives::record(const char* kind, std::string where) {
  CollectiveCall mine;
  {
    std::lock_guard<std::mutex> g(mu_);
    mine = CollectiveCall{++seq_, kind, std::move(where)};
    last_ = mine;
    learn_kind(kind);
    boot_.post_collective(ticket_of(mine));
  }
  {
    std::lock_guard<std::mutex> g(observers_mu_);
    for (auto& [handle, fn] : observers_) fn(mine);
  }
  if (checking_) compare(mine);
  return mine;
}

int Collectives::observe(Observer fn) {
  std::lock_guard<std::mutex> g(observers_mu_);
  observers_.emplace_back(++next_observer_, std::move(fn));
  return next_observer_;
}

void Collectives::unobserve(int handle) {
  std::lock_guard<std::mutex> g(observers_mu_);
  std::erase_if(observers_, [&](const auto& o) { return o.first == handle; });
}

void Collectives::compare(const CollectiveCall& mine) {
  const auto blobs = boot_.allgather(encode(mine));
  std::vector<CollectiveCall> all;
  for (size_t r = 0; r < blobs.size(); ++r) all.push_back(decode(blobs[r], static_cast<int>(r)));
  if (std::all_of(all.begin(), all.end(), [&](const CollectiveCall& c) { return same(c, all[0]); })) return;
  std::ostringstream os;
  os << "the processes' collective calls differ (a collective made by some processes only, or in another "
        "order; LOOM_CHECK):";
  for (size_t r = 0; r < all.size(); ++r) os << "\n  rank " << r << ": " << all[r].str();
  fail(os.str());
}

uint64_t Collectives::count() const {
  std::lock_guard<std::mutex> g(mu_);
  return seq_;
}

CollectiveCall Collectives::last() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_;
}

}  // namespace loom::runtime
