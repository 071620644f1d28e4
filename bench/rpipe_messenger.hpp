#pragma once
// bench_rpipe's `messenger` rows: the same bytes between ranks 0 and 1 as a Messenger call whose
// payload is copied into the receiver's chunk (call_buffer, seed 000), measured the way the
// rwrite rows are: a ping-pong halved, and a stream whose last arrival is answered.
#include <cstddef>

#include "loom/invoke/invoker.hpp"

namespace loom::bench {

double messenger_latency_us(invoke::Invoker& inv, size_t size, int n);
double messenger_rate_MBps(invoke::Invoker& inv, size_t size, int n);

}  // namespace loom::bench
