#pragma once
// A rank's output under a launcher survives the job's end: stdout goes to a pipe there (fully
// buffered by default), and a rank ended by the launcher (SIGTERM) or by an error would lose what
// its buffer held.

namespace loom::runtime {

// Under a launcher (loomrun, or PMIx's) with stdout not a terminal: stdout becomes line-buffered; SIGTERM, SIGINT and
// SIGHUP, where the program left them at their default, flush stdout and stderr and then end
// the process as the signal would. Runs once; Runtime's constructor calls it (and so does the
// library's start-up, for output written before the Runtime exists).
void keep_output_on_endings();

// Flushes stdout and stderr unless another thread is in the middle of writing to them (safe in
// a signal handler that interrupted such a write: that stream is skipped).
void flush_output_if_free();

}  // namespace loom::runtime
