#pragma once
// rpipe (seed 002): a one-sided channel between two ranks with a remote heap per direction.
//
//   Pipe p(rt, peer, End::Writer, /*width*/ 8, Mode::HalfDuplex);   // both ranks, same order
//   writer:  RAddr a = p.rmalloc(n); fill p.rmem(a); p.rwrite(a);    // zero-copy WRITE + flag
//   reader:  Message m = p.next(); use p.rmem(m.addr); p.rfree(m.addr);
//
// rmalloc returns a network address in the heap of the writer's direction: bytes registered at
// the reader, mirrored at the writer, so that rmem gives each end its own copy and rwrite is one
// WRITE from the writer's copy to the reader's, the notified flag (the allocation's serial) in the
// 8 bytes after the data. The writer's copy is "in use" until the WRITE's local completion
// (in_use); the reader's is "ready" once the flag has landed (next returns it then). roffer is
// the pull side: the writer marks its copy ready and announces it; the reader brings the bytes
// with rread (one READ of data and flag) when it wants them. At most `width` messages are in
// flight (announced, not yet taken by next). Errors (misuse, a peer that broke the protocol or
// died) are loom::Error. One thread at a time uses an end; both ends construct the pipe, and
// destroy it, together (docs/rpipe.md).
#include <cstddef>
#include <memory>
#include <optional>
#include <span>

#include "loom/dsm/runtime/runtime.hpp"
#include "loom/rpipe/types.hpp"

namespace loom::rpipe {

class Pipe {
 public:
  // Pairwise collective: rank `peer` constructs its end with the same width, mode and options
  // (checked; the other End in a half-duplex pipe). Pipes between two ranks pair up in the order
  // each rank creates them.
  Pipe(Runtime& rt, int peer, End end, uint32_t width, Mode mode, Options options = {});
  ~Pipe();
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  // Writing end: `size` bytes in the reader's heap (waits while the heap is full and the reader
  // still holds space it will free; fails if `size` can never fit).
  RAddr rmalloc(size_t size);
  // This end's copy of `a`: the writer's before rwrite/roffer, the reader's once ready.
  std::span<std::byte> rmem(const RAddr& a);
  // Pushes the writer's copy of `a` to the reader (waits for a credit when `width` are in flight).
  void rwrite(const RAddr& a);
  // Marks the writer's copy of `a` ready and announces it; the reader pulls it with rread.
  void roffer(const RAddr& a);
  // True while the WRITE of `a` (rwrite) has not completed locally: its source is "in use".
  bool in_use(const RAddr& a);
  // Reading end: the next message, in the order written (waits); try_next does not wait.
  Message next();
  std::optional<Message> try_next();
  // Brings the first `size` bytes of an offered message (0: all of it) into this end's copy.
  void rread(const RAddr& a, size_t size = 0);
  // Gives `a` back to its heap: the reader after use; the writer for space it never sent.
  void rfree(const RAddr& a);

  int peer() const;
  Mode mode() const;
  uint32_t width() const;
  const Options& options() const;
  uint32_t id() const;  // RAddr::pipe of this pipe's addresses

  struct Stats {
    uint64_t rmallocs = 0;
    uint64_t collects = 0;        // READs of the reader's free list (deferred)
    uint64_t empty_collects = 0;  // ... that brought nothing new
    uint64_t service_calls = 0;   // round trips through the service (immediate, new segments)
    uint64_t credit_waits = 0;    // rwrite/roffer found `width` in flight
    uint64_t heap_waits = 0;      // rmalloc found the heap full at its last segment
    uint32_t segments = 0;
    uint64_t heap_bytes = 0;
    uint64_t in_use_bytes = 0;       // not free in the state's keeper's view (deferred: uncollected frees too)
    uint64_t peak_in_use_bytes = 0;
  };
  // The writing direction's heap as this end sees it.
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The seed's functions over a pipe.
inline RAddr rmalloc(Pipe& p, size_t size) { return p.rmalloc(size); }
inline std::span<std::byte> rmem(Pipe& p, const RAddr& a) { return p.rmem(a); }
inline void rwrite(Pipe& p, const RAddr& a) { p.rwrite(a); }
inline void rread(Pipe& p, const RAddr& a, size_t size) { p.rread(a, size); }
// rfree(addr) without the pipe: the pipe of this process that `a` names (a clear error if none).
void rfree(const RAddr& a);

}  // namespace loom::rpipe
