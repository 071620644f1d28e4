#pragma once
// rpipe (docs/rpipe.md): one-sided pipes between two ranks with remote heaps per direction
// (rmalloc, rmem, rwrite, roffer, rread, rfree).
#include "loom/dsm.hpp"
#include "loom/rpipe/pipe.hpp"
