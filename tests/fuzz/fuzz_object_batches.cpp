// The objects' batch handlers (objects/hash_map_batches.hpp, queue_batches.hpp): what the owner
// of a HashMap part or the host of a Queue runs for a call from another process, with every
// argument from the wire — the object's id, the level, a count, the caller's reply pointers and
// the bytes of entries, keys or values. A lone-process job (a real Runtime and Context) holds an
// owner-invoked HashMap (object 0), Queue (object 1) and checksum Queue (object 2); each input is
// one call. A handler must
// neither fault nor write outside the registered memory the reply pointers name, and a reply
// lands only in it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "loom/dsm/runtime/runtime.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/hash_map.hpp"
#include "loom/objects/queue.hpp"

using namespace loom;
using namespace loom::objects;

namespace {

using Map = HashMap<uint64_t, uint64_t>;
using Q = Queue<uint64_t>;
constexpr size_t kReplyWords = 4096;  // the caller's reply area: what a batch's results may fill

struct Harness {
  int argc = 1;
  char* args[2] = {const_cast<char*>("fuzz_object_batches"), nullptr};
  char** argv = args;
  Runtime rt{argc, argv};
  Context ctx{rt};
  Map map{ctx, 1024, Policy::OwnerInvoked};
  Q queue{ctx, 0, 256, Policy::OwnerInvoked};
  Q checksum_queue{ctx, 0, 256, QueueLayout::Checksum, Policy::OwnerInvoked};
  memory::RDMAMemory reply = rt.heap().allocate(kReplyWords * 8);
  ~Harness() { rt.heap().free(reply.addr); }
};

Harness* g_h = nullptr;

struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t byte() { return n > 0 ? (--n, *p++) : 0; }
  uint64_t word() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
};

// A reply pointer as a caller could name it: mostly the reply area (at a chosen offset, in or
// beyond it), sometimes another rank or an address of nothing.
template <typename T>
GlobalPtr<T> reply_ptr(Input& in) {
  const uint8_t how = in.byte();
  const uint64_t base = g_h->reply.address();
  if (how < 200) return GlobalPtr<T>(0, base + (static_cast<uint64_t>(in.byte()) * 8) % (kReplyWords * 8));
  if (how < 220) return GlobalPtr<T>(1 + how % 4, base);
  return GlobalPtr<T>(0, in.word());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("LOOM_LOG", "error", 1);
  g_h = new Harness();
  std::atexit([] { delete g_h; });  // libFuzzer ends by exit(): the job directory goes with it
  return 0;
}

// Bytes: [handler][object id][level][reply pointers...][count] then the batch's bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const uint8_t handler = in.byte() % 4;
  const uint8_t id_byte = in.byte();
  const uint32_t id = id_byte < 250 ? id_byte % 4 : static_cast<uint32_t>(in.word());
  const auto level = static_cast<Level>(in.byte());  // any byte: the wire may carry any
  std::vector<std::byte> bytes;
  auto rest = [&] { bytes.assign(reinterpret_cast<const std::byte*>(in.p), reinterpret_cast<const std::byte*>(in.p) + in.n); };
  switch (handler) {
    case 0: {
      const auto status = reply_ptr<uint64_t>(in);
      rest();
      Map::on_insert_batch(id, status, std::span<std::byte>(bytes));
      break;
    }
    case 1: {
      const auto out = reply_ptr<hash::Found<uint64_t>>(in);
      rest();
      Map::on_find_batch(id, level, out, std::span<std::byte>(bytes));
      break;
    }
    case 2: {
      const auto done = reply_ptr<uint64_t>(in);
      rest();
      Q::on_push_many(id, level, done, std::span<std::byte>(bytes));
      break;
    }
    default: {
      const auto count = reply_ptr<uint64_t>(in);
      const auto out = reply_ptr<uint64_t>(in);
      const uint64_t n = in.word();
      Q::on_pop_many(id, level, n, count, out);
      break;
    }
  }
  return 0;
}
