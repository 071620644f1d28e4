#include "loom/objects/cost_model.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/chooser.hpp"
#include "loom/objects/settings.hpp"

namespace loom::objects {

std::string_view name(Op op) {
  switch (op) {
    case Op::HashInsert: return "hash-insert";
    case Op::HashFind: return "hash-find";
    case Op::QueuePush: return "queue-push";
    case Op::QueuePop: return "queue-pop";
  }
  return "?";
}

namespace {

// Every component with its name in the file.
template <typename C, typename F>
void each_field(C& c, F&& f) {
  f("get", c.get), f("put", c.put), f("fad", c.fad), f("cas", c.cas), f("atomic_read", c.atomic_read), f("miss", c.miss), f("cas_contended", c.cas_contended);
  f("cas_persistent", c.cas_persistent), f("fad_single", c.fad_single);
  f("rpc", c.rpc), f("call", c.call), f("post", c.post), f("publish_phasal", c.publish_phasal);
  f("line", c.line);
  f("h_insert", c.h_insert), f("h_find", c.h_find), f("h_push", c.h_push), f("h_pop", c.h_pop), f("op", c.op);
  f("h_find_phasal", c.h_find_phasal), f("h_push_phasal", c.h_push_phasal), f("h_pop_phasal", c.h_pop_phasal);
  f("region_atomic", c.region_atomic), f("region_acquire", c.region_acquire), f("region_release", c.region_release);
  f("region_release_clean", c.region_release_clean), f("region_write", c.region_write), f("region_read", c.region_read);
  f("region_write_shared", c.region_write_shared), f("region_release_shared", c.region_release_shared);
}

// The best-case sequence of each operation (objects/hash_map_ops.hpp, queue_ops.hpp), one at a
// time: a transfer posted ahead of a CAS on the same queue pair adds `post`, not a round trip.
double one_sided(const Components& c, Op op, Level l) {
  const bool phasal = l != Level::Atomic;
  switch (op) {
    // claim (a fresh bucket); key and value, then the publication behind them: a CAS, or
    // (phasal, seed 001's one atomic and a put) the Ready word's put where the Endpoint maps
    // the owner's memory (RemoteSlots::ordered_publish), else a CAS still
    case Op::HashInsert: return c.miss + c.cas + c.post + (phasal ? c.publish_phasal : c.cas);
    case Op::HashFind: return c.line + (phasal ? c.get : c.atomic_read + c.get + c.atomic_read);  // snapshot, or seqlock
    // counter and sequence read together; claim; the value and the CAS behind it together (the
    // CAS's completion is the value's); phasal: claim, slot, and a pop's blocking publication
    case Op::QueuePush: return phasal ? c.fad + c.put : c.atomic_read + c.post + c.cas + c.post + c.cas;
    case Op::QueuePop: return phasal ? c.fad + c.get + c.put : c.atomic_read + c.post + c.cas + c.post + c.cas;
  }
  return 0;
}

// The operation's own logic at its level, on lines in the first-level cache (a hash operation's
// bucket line is bucket_line's).
double handler(const Components& c, Op op, Level l) {
  const bool phasal = l != Level::Atomic;
  switch (op) {
    case Op::HashInsert: return c.h_insert;
    case Op::HashFind: return phasal ? c.h_find_phasal : c.h_find;
    case Op::QueuePush: return phasal ? c.h_push_phasal : c.h_push;
    case Op::QueuePop: return phasal ? c.h_pop_phasal : c.h_pop;
  }
  return 0;
}
double bucket_line(const Components& c, Op op) { return op == Op::HashInsert || op == Op::HashFind ? c.line : 0; }

double cached(const Components& c, Op op, Level l, Writers w) {
  const double a = c.region_atomic, acq = a + c.region_acquire;
  const double write = w == Writers::Many ? c.region_write_shared : c.region_write;
  const double release = w == Writers::Many ? c.region_release_shared : c.region_release;
  const bool phasal = l != Level::Atomic;
  switch (op) {
    // A slot's line comes while the accessor does its bookkeeping: region_read and region_write,
    // timed on slots in many lines beyond the first-level cache, have it in them.
    case Op::HashInsert: return acq + write + a + release;
    case Op::HashFind: return phasal ? c.region_read : acq + c.region_read + a;
    case Op::QueuePush: return phasal ? a + write + 2 * a : a + acq + a + write + a + release;
    case Op::QueuePop: return phasal ? a + c.region_read + 2 * a : a + acq + a + c.region_read + a + c.region_release_clean;
  }
  return 0;
}

// Batched forms (per operation): their requests in flight together, their round trips shared.
double one_sided_batch(const Components& c, Op op, Level l, double b) {
  const bool phasal = l != Level::Atomic;
  switch (op) {
    case Op::HashInsert: return 3 * c.post + 2 * c.cas / b;
    case Op::HashFind: return phasal ? c.post + c.get / b : 3 * c.post + c.atomic_read / b;
    case Op::QueuePush: return phasal ? c.post + c.fad / b : one_sided(c, op, l);
    case Op::QueuePop: return phasal ? c.post + (c.fad + c.get) / b : one_sided(c, op, l);
  }
  return 0;
}
double invoked_batch(const Components& c, Op op, Level l, double b) {
  // One call per owner carrying the batch; the results (or the first failure) put back.
  return c.post + handler(c, op, l) + bucket_line(c, op) + c.rpc / b;
}

}  // namespace

std::string Components::serialize() const {
  std::ostringstream o;
  o << "# Loom cost-model components (docs/objects.md, \"Cost model\"), microseconds per operation.\n"
    << "# Written by loom-calibrate; read by Auto objects.\n";
  o << "provider " << provider << "\nprocesses " << processes << "\n";
  o.precision(10);
  each_field(*this, [&](const char* n, double v) { o << n << " " << v << "\n"; });
  return o.str();
}

Components Components::parse(const std::string& text, const std::string& source) {
  Components c;
  std::map<std::string, double*> fields;
  each_field(c, [&](const char* n, double& v) { fields[n] = &v; });
  std::map<std::string, bool> seen;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream l(line);
    std::string key, value, extra;
    if (!(l >> key)) continue;
    if (!(l >> value) || (l >> extra)) fail("objects: ", source, ":", lineno, ": expected 'name value'");
    if (key == "provider") c.provider = value;
    else if (key == "processes") c.processes = static_cast<int>(std::strtol(value.c_str(), nullptr, 10));
    else {
      auto it = fields.find(key);
      if (it == fields.end()) fail("objects: ", source, ":", lineno, ": unknown component '", key, "'");
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(v >= 0) || v > 1e6)
        fail("objects: ", source, ":", lineno, ": '", value, "' is not a cost in microseconds");
      *it->second = v;
    }
    seen[key] = true;
  }
  for (const auto& [n, p] : fields)
    if (!seen.count(n)) fail("objects: ", source, ": component '", n, "' is missing (rerun loom-calibrate)");
  if (c.provider.empty()) fail("objects: ", source, ": no provider line");
  return c;
}

Components Components::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("objects: cannot read the calibration file ", path);
  std::ostringstream s;
  s << f.rdbuf();
  return parse(s.str(), path);
}

void Components::save(const std::string& path) const {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!(f << serialize())) fail("objects: cannot write ", tmp);
  }
  std::filesystem::rename(tmp, path);  // readers see the old file or the new one, never half
}

bool adaptation_enabled() {
  static const bool on = loom::settings::get_bool(settings::kAdapt);
  return on;
}

std::string calibration_path() {
  if (auto s = loom::settings::raw(settings::kCalibration)) return *s;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') return std::string(x) + "/loom/calibration.txt";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return std::string(h) + "/.cache/loom/calibration.txt";
  return ".loom-calibration.txt";
}

double predict(const Components& c, Op op, Policy p, Level l, size_t batch, Writers w) {
  const double b = static_cast<double>(batch == 0 ? 1 : batch);
  // Every policy runs the operation's own logic once (h: hashing, probing, comparing) and its
  // front end at the caller (c.op, once per operation or batch), plus its way to the data. One
  // one-sided operation at a time has its logic inside c.op (measured as a whole one-sided find
  // less its get) and its memory accesses are fabric operations: h, which is both on local
  // memory, would count them again. A Cached operation reads and compares the slots of its
  // local copy as h does, after each accessor; a batch amortizes c.op, not each operation's logic.
  if (l == Level::Local) {
    if (op != Op::QueuePush && op != Op::QueuePop) fail("objects: predict: Level::Local is a Queue's, not ", name(op), "'s");
    return c.op + handler(c, op, Level::Atomic);  // the host's own memory, whatever the policy
  }
  const double h = handler(c, op, l);
  switch (p) {
    case Policy::OneSided: return batch > 1 ? h + c.op / b + one_sided_batch(c, op, l, b) : c.op + one_sided(c, op, l);
    case Policy::OwnerInvoked: return c.op / b + (batch > 1 ? invoked_batch(c, op, l, b) : c.rpc + h + bucket_line(c, op));
    case Policy::Cached: return h + c.op / b + cached(c, op, l, w);
    case Policy::Auto: break;
  }
  fail("objects: predict: Auto is not a fixed policy");
}

double predict_checksum(const Components& c, Op op, Policy p) {
  if (op != Op::QueuePush && op != Op::QueuePop) fail("objects: predict_checksum: ", name(op), " is not a queue operation");
  if (p == Policy::OwnerInvoked) return predict(c, op, p, Level::Atomic);  // the host runs it on its memory either way
  if (p != Policy::OneSided) fail("objects: predict_checksum: a checksum queue is OneSided or OwnerInvoked");
  // push: tail and slot read together, the claim, the slot's WRITE waited for; pop: head, tail
  // and slot read together, the claim, the free tag's WRITE waited for
  const double reads = op == Op::QueuePush ? c.atomic_read + c.post : c.atomic_read + 2 * c.post;
  return c.op + reads + c.cas + c.put;
}

double predict_contended(const Components& c, Op op, Level l) {
  if (op != Op::QueuePush && op != Op::QueuePop) fail("objects: predict_contended: ", name(op), " is not a queue operation");
  const bool push = op == Op::QueuePush;
  if (l == Level::Local) fail("objects: predict_contended: Level::Local has one process");
  if (l != Level::Atomic) return c.op + c.fad_single + (push ? c.put : c.get + c.put);
  return c.op + c.atomic_read + c.post + c.cas_persistent + c.post + c.cas;  // the slot's publication uncontended
}

Policy cheapest(const Components& c, Op op, Level l, std::span<const Policy> candidates, size_t batch) {
  Policy best = candidates.empty() ? Policy::OneSided : candidates.front();
  double best_us = std::numeric_limits<double>::infinity();
  for (Policy p : candidates) {
    const double us = predict(c, op, p, l, batch);
    if (us < best_us) best_us = us, best = p;
  }
  return best;
}

bool prefer_cached(const Components& c, Op write, Op read, Workload w) {
  const Policy owners[] = {Policy::OneSided, Policy::OwnerInvoked};
  if (w.level == Level::Local) return false;  // the host's own memory: the queue stays at its host
  const Level wl = w.level == Level::Atomic ? Level::Atomic : Level::PhasalWrite;
  const Level rl = w.level == Level::Atomic ? Level::Atomic : Level::PhasalRead;
  auto at_owners = [&](Op op, Level l) { return predict(c, op, cheapest(c, op, l, owners), l); };
  const double remote = w.read_share * at_owners(read, rl) + (1 - w.read_share) * at_owners(write, wl);
  const double local = w.read_share * predict(c, read, Policy::Cached, rl, 1, w.writers) + (1 - w.read_share) * predict(c, write, Policy::Cached, wl, 1, w.writers);
  return local < remote;
}

}  // namespace loom::objects
