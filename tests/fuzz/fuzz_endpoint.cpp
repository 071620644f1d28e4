// Queue-pair endpoints (dsm/fabric): the blob a peer publishes through the bootstrap to connect
// is a clear error unless it has the provider's size and magic number and names that peer.
#include <cstdint>
#include <cstdlib>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/shm/shm_internal.hpp"
#ifdef LOOM_HAVE_VERBS
#include "loom/dsm/fabric/verbs/verbs_internal.hpp"
#endif

template <typename Blob>
void check(std::span<const std::byte> bytes, uint32_t magic, int rank, const char* provider) {
  try {
    Blob b = loom::fabric::decode_endpoint<Blob>(bytes, magic, rank, provider);
    if (bytes.size() != sizeof(Blob) || b.magic != magic || b.rank != rank) std::abort();
  } catch (const loom::Error&) {
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int rank = data[0] % 8;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  check<loom::fabric::shm::EndpointBlob>(bytes, loom::fabric::shm::kEndpointMagic, rank, "shm");
#ifdef LOOM_HAVE_VERBS
  check<loom::fabric::verbs::EndpointBlob>(bytes, loom::fabric::verbs::kEndpointMagic, rank, "verbs");
#endif
  return 0;
}
