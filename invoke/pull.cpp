// Pulls: call_buffer's READ form with Async::Yes (docs/invocation.md, "The READ form, waited for
// or not"). The destination thread posted the READ of the caller's buffer and went on; the call
// waits here, in arrival order, and runs at the first poll that finds its READ completed. It is
// counted as executed (the call barrier's counts) and its Synchronizer notified only then.
#include <string>
#include <utility>

#include "loom/invoke/inbox.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

void Inbox::defer_pull(Pull p) { pulls_.push_back(std::move(p)); }

// Runs every pull whose READ has completed (completions come in each Transmitter's post order,
// so pulls from one rank run in the order they arrived); returns how many ran.
int Inbox::finish_pulls() {
  int n = 0;
  for (auto it = pulls_.begin(); it != pulls_.end();) {
    if (!inv_.tx(it->src_rank).test(it->tag)) {
      ++it;
      continue;
    }
    Pull p = std::move(*it);
    it = pulls_.erase(it);
    run_pull(p);
    count_executed(1);
    ++n;
  }
  return n;
}

void Inbox::run_pull(Pull& p) {
  signal::Transmitter& tx = inv_.tx(p.src_rank);
  if (tx.errors() != p.errors) {
    report_bad_call(p.src_rank, p.fid, std::string("the READ of the caller's buffer failed: ") + fabric::to_string(tx.last_error()));
  } else {
    Incoming in;
    in.src_rank = p.src_rank;
    in.inbox = this;
    in.capture_len = p.entry->capture_size;
    in.captures = p.captures.data();
    in.buffer = std::span(static_cast<std::byte*>(p.pulled.addr), p.pulled.size);
    bool ran = true;
    try {
      CallScope scope(p.src_rank, p.entry, index_);
      p.entry->fn(in);
    } catch (const Error& err) {
      report_bad_call(p.src_rank, p.fid, err.what());
      ran = false;
    }
    if (ran && p.has_notify) notify(p.nd);
  }
  inv_.heap().free(p.pulled.addr);
}

// Teardown: a call whose READ was still in flight never ran; named as unrun like the others,
// once its READ has landed (its buffer is freed after).
void Inbox::discard_pulls() {
  for (Pull& p : pulls_) {
    inv_.tx(p.src_rank).wait(p.tag);
    ++(*discard_)[p.entry->display];
    inv_.heap().free(p.pulled.addr);
  }
  pulls_.clear();
}

}  // namespace loom::invoke
