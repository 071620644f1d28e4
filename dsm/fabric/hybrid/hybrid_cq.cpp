// The shm+verbs completion queue and the relay of device completion events.
#include "loom/dsm/fabric/hybrid/hybrid_cq.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include "loom/dsm/common/error.hpp"

namespace loom::fabric::hybrid {

EventRelay::EventRelay() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  stop_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ep_ < 0 || stop_ < 0) fail_errno("shm+verbs: cannot create the completion event relay");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  epoll_ctl(ep_, EPOLL_CTL_ADD, stop_, &ev);
  thread_ = std::thread([this] { run(); });
}

EventRelay::~EventRelay() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(stop_, &one, sizeof one);
  thread_.join();
  ::close(ep_);
  ::close(stop_);
}

void EventRelay::add(HybridCq* cq, int fd) {
  std::lock_guard<std::mutex> g(mu_);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = cq;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) fail_errno("shm+verbs: cannot watch a completion channel");
  live_.insert(cq);
}

void EventRelay::remove(HybridCq* cq, int fd) {
  std::lock_guard<std::mutex> g(mu_);
  epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
  live_.erase(cq);
}

void EventRelay::run() {
  epoll_event evs[16];
  for (;;) {
    const int n = epoll_wait(ep_, evs, 16, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    std::lock_guard<std::mutex> g(mu_);
    for (int i = 0; i < n; ++i) {
      auto* cq = static_cast<HybridCq*>(evs[i].data.ptr);
      if (cq == nullptr) return;  // the stop descriptor
      if (live_.count(cq)) cq->on_device_event();
    }
  }
}

HybridCq::HybridCq(std::unique_ptr<CompletionQueue> shm, std::unique_ptr<CompletionQueue> device, EventRelay& relay, uint32_t depth)
    : shm_(static_cast<shm::ShmCq*>(shm.release())), device_(static_cast<verbs::VerbsCq*>(device.release())), relay_(relay), depth_(depth) {
  relay_.add(this, device_->channel_fd());
}

HybridCq::~HybridCq() { relay_.remove(this, device_->channel_fd()); }

int HybridCq::poll(std::span<Completion> out) {
  CompletionQueue* first = shm_.get();
  CompletionQueue* second = device_.get();
  if (turn_.fetch_add(1, std::memory_order_relaxed) & 1u) std::swap(first, second);
  int n = first->poll(out);
  if (static_cast<size_t>(n) < out.size()) n += second->poll(out.subspan(static_cast<size_t>(n)));
  return n;
}

// As the verbs queue does: the first call asks for an event and returns (the caller polls
// once more before anything can be missed); later calls sleep on the ring until a completion
// lands there, the relay reports a device event, or the timeout passes.
void HybridCq::wait(std::chrono::nanoseconds timeout) {
  if (pending_.exchange(0, std::memory_order_acq_rel) != 0) return;
  if (!armed_.exchange(true, std::memory_order_acq_rel)) {
    device_->arm();
    return;
  }
  shm_->wait_also(timeout, &pending_);
}

void HybridCq::on_device_event() {
  device_->take_events();
  armed_.store(false, std::memory_order_release);
  pending_.store(1, std::memory_order_seq_cst);
  shm_->interrupt();
}

}  // namespace loom::fabric::hybrid
