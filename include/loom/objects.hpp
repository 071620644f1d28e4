#pragma once
// Distributed objects (docs/objects.md): global pointers, the Endpoint, distributed arrays, and
// the HashMap and Queue under a per-object policy (one-sided, owner-invoked, cached, auto).
#include "loom/coherence.hpp"
#include "loom/invoke.hpp"
#include "loom/objects/context.hpp"
#include "loom/objects/distributed_array.hpp"
#include "loom/objects/endpoint.hpp"
#include "loom/objects/global_ptr.hpp"
#include "loom/objects/hash_map.hpp"
#include "loom/objects/policy.hpp"
#include "loom/objects/queue.hpp"
