#pragma once
// Loom's substrate: the runtime (launch, naming, pinning, service calls), registered memory and
// remote allocation, the verbs-shaped fabric and the Transmitter, shared regions' addresses.
// Everything a program needs to start a job and move bytes one-sided.
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/memory/general_allocator.hpp"
#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/memory/registered_heap.hpp"
#include "loom/dsm/region/region.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/dsm/runtime/service.hpp"
#include "loom/dsm/signal/notified_flag.hpp"
#include "loom/dsm/signal/transmitter.hpp"
