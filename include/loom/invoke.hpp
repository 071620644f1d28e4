#pragma once
// Remote invocation (docs/invocation.md): the Invoker, calls, call_buffer, call_return,
// broadcast, Synchronizers and the Aggregator.
#include "loom/dsm.hpp"
#include "loom/invoke/aggregator.hpp"
#include "loom/invoke/calls.hpp"
#include "loom/invoke/future.hpp"
#include "loom/invoke/invoker.hpp"
#include "loom/invoke/synchronizer.hpp"
