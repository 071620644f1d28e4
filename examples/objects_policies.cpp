// One hash map and one queue, written once, under the policy named on the command line
// (docs/objects.md): every process inserts its words into the map and pushes work items into a
// queue at rank 0; after a barrier every process finds everyone's words and rank 0's workers pop
// the items. The same program runs one-sided, owner-invoked, cached or auto:
//   loomrun -n 4 objects_policies [onesided|invoked|cached|auto]
#include <cstdio>
#include <string>
#include <vector>

#include "loom/objects/hash_map.hpp"
#include "loom/objects/queue.hpp"

using namespace loom;
using objects::Level;

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  const objects::Policy policy = objects::parse_policy(argc > 1 ? argv[1] : "auto");
  objects::Context ctx(rt);  // collective: Endpoint, Invoker, Space
  const int me = rt.rank(), np = rt.size();
  constexpr uint64_t kWords = 1000;

  objects::HashMap<uint64_t, uint64_t> squares(ctx, 4 * kWords * static_cast<size_t>(np), policy);
  objects::Queue<uint64_t> work(ctx, 0, kWords * static_cast<size_t>(np), policy);

  // Inserts: one at a time, then a batch (all in flight together).
  std::vector<std::pair<uint64_t, uint64_t>> batch;
  for (uint64_t i = 0; i < kWords; ++i) {
    const uint64_t k = static_cast<uint64_t>(me) * kWords + i;
    if (i % 2 == 0) squares.insert(k, k * k);
    else batch.emplace_back(k, k * k);
  }
  squares.insert_many(batch);
  // Work items go to rank 0's queue (a push phase: only pushes until the barrier).
  for (uint64_t i = 0; i < kWords; ++i) work.try_push(static_cast<uint64_t>(me) << 32 | i, Level::PhasalPush);
  ctx.barrier();  // runs others' owner-invoked operations while it waits; a release and an acquire

  // Finds of everyone's keys (a find phase), batched.
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < kWords * static_cast<uint64_t>(np); k += 7) keys.push_back(k);
  size_t right = 0;
  const auto found = squares.find_many(keys, Level::PhasalFind);
  for (size_t i = 0; i < keys.size(); ++i) right += found[i] == keys[i] * keys[i];
  // Every process pops its share of the work (a pop phase).
  size_t popped = 0;
  for (std::vector<uint64_t> got; !(got = work.pop_many(64, Level::PhasalPop)).empty();) popped += got.size();
  ctx.barrier();

  std::printf("rank %d (%s): %zu of %zu squares right, %zu work items popped\n", me, std::string(objects::name(squares.current(objects::Op::HashFind, Level::PhasalFind))).c_str(),
              right, keys.size(), popped);
  return right == keys.size() ? 0 : 1;
}
