#pragma once
// Seed 001's node sweep, carried past this machine (docs/performance-at-scale.md): every process
// of `nodes` x `ranks_per_node` runs one container operation at a time on keys spread evenly over
// every process's part, so of its operations 1/P land in its own part, (R-1)/P in a part on its
// node and the rest across the network. (A Cached object's words are spread the same way
// whatever the keys: its region's blocks have every process as manager in turn.) The predicted microseconds per operation mix the cost
// model's predictions (objects/cost_model.hpp) from the components measured against each kind of
// part (an owner-invoked operation on the process's own part runs in place, without a call; a
// Cached one writes blocks others wrote: Writers::Many); the job's operations per second are P of those. The model has no contention, no
// collisions and a core for every process (a busy owner, a loaded link and an oversubscribed
// host are not in it).
#include "loom/objects/context.hpp"
#include "loom/objects/cost_model.hpp"

namespace loom::objects {

struct Placements {
  Components self;  // rank 0 against its own part
  Components node;  // against a part on its node (unused with one process a node)
  Components wire;  // against a part across the network
};

struct Scale {
  int nodes = 1;
  int ranks_per_node = 1;
  int processes() const { return nodes * ranks_per_node; }
};

// The components an Auto object's placement is decided with at this scale: the wire's across
// nodes, else a node's, else the process's own.
const Components& deciding(const Placements& c, Scale s);
// This job's nodes as rank 0's transports show them (the processes of a node reach each other
// through their own memory's transport, the others across a wire or a network), a process on
// rank 0's node other than rank 0 and the first one across (0: none). Collective; the same on
// every rank; an error if the processes are not whole nodes of rank 0's node's size.
struct JobLayout {
  Scale scale;
  int node_peer = 0;
  int wire_peer = 0;
};
JobLayout job_layout(Context& ctx);
// Collective: the components against rank 0's own part, a part on its node and one across (those
// the layout has), `iters` operations each.
Placements measure_placements(Context& ctx, const JobLayout& l, int iters);

// Microseconds per operation and process under a fixed policy, every process writing the object
// (Writers::Many) or one alone; one at a time, or amortized over a batch.
double predict_at(const Placements& c, Scale s, Op op, Policy p, Level l, Writers w = Writers::Many, size_t batch = 1);
// What an Auto object pays: a region if the wire's components prefer it for the workload (as its
// placement is chosen), else the cheaper of one-sided and owner-invoked at this scale.
double predict_auto_at(const Placements& c, Scale s, Op write, Op read, Op op, Workload w, Level l);
// The job's operations per second.
inline double ops_per_s(Scale s, double us_per_op) { return us_per_op > 0 ? s.processes() * 1e6 / us_per_op : 0; }

}  // namespace loom::objects
