// Service calls: a handler registered by name runs on the receiving process's service thread.
// Any thread may call any process without setup. Run: loomrun -n 3 ./service_calls
#include <cstdio>
#include <cstring>
#include <string>

#include "loom/dsm/runtime/runtime.hpp"

int main(int argc, char** argv) {
  loom::Runtime rt(argc, argv);
  // Every process registers the same names, so the ids agree everywhere.
  rt.service().register_handler("example.square", [](const loom::runtime::ServiceRequest& req) {
    uint64_t x;
    if (req.payload.size() != sizeof x) throw loom::Error("example.square takes one 8-byte integer");
    std::memcpy(&x, req.payload.data(), sizeof x);
    uint64_t y = x * x;
    std::vector<std::byte> out(sizeof y);
    std::memcpy(out.data(), &y, sizeof y);
    return out;
  });
  rt.barrier();  // handlers are in place everywhere before anyone calls

  const int right = (rt.rank() + 1) % rt.size();
  uint64_t x = static_cast<uint64_t>(rt.rank() + 2);
  auto reply = rt.service().call_sync(right, loom::runtime::Service::id_of("example.square"),
                                      std::as_bytes(std::span(&x, 1)));
  uint64_t y;
  std::memcpy(&y, reply.data(), sizeof y);
  std::printf("rank %d asked rank %d to square %llu: %llu\n", rt.rank(), right, static_cast<unsigned long long>(x),
              static_cast<unsigned long long>(y));

  // A bad request is an error at the caller, with the handler's reason; nothing crashes.
  try {
    rt.service().call_sync(right, loom::runtime::Service::id_of("example.square"), {});
  } catch (const loom::Error& e) {
    std::printf("rank %d: expected error: %s\n", rt.rank(), e.what());
  }
  rt.barrier();
  return y == x * x ? 0 : 1;
}
