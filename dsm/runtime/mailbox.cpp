#include "loom/dsm/runtime/mailbox.hpp"

#include <chrono>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime {

namespace {
constexpr const char* kFunction = "loom.mailbox.keep";
constexpr auto kLivenessLook = std::chrono::milliseconds(10);  // a wait looks at its sender this often
}  // namespace

Mailbox::Mailbox(Service& service, PeerWatch& peers) : service_(service), peers_(peers) {
  function_ = service_.register_handler(kFunction, [this](const ServiceRequest& req) {
    keep(req.src_rank, req.payload);
    return std::vector<std::byte>{};
  });
}

Mailbox::~Mailbox() { service_.unregister_handler(function_); }

size_t Mailbox::max_payload() const { return service_.max_payload() - sizeof(uint64_t); }

void Mailbox::send(int dest, uint64_t tag, std::span<const std::byte> bytes) {
  if (bytes.size() > max_payload()) fail("mailbox: a message of ", bytes.size(), " bytes is over the limit of ", max_payload());
  std::vector<std::byte> msg(sizeof tag + bytes.size());
  std::memcpy(msg.data(), &tag, sizeof tag);
  if (!bytes.empty()) std::memcpy(msg.data() + sizeof tag, bytes.data(), bytes.size());
  service_.call(dest, function_, msg);
}

void Mailbox::keep(int src, std::span<const std::byte> payload) {
  // From the wire: a message too short to hold its tag is refused (the service reports it).
  if (payload.size() < sizeof(uint64_t)) fail("mailbox: a message of ", payload.size(), " bytes from rank ", src, " holds no tag");
  uint64_t tag;
  std::memcpy(&tag, payload.data(), sizeof tag);
  {
    std::lock_guard<std::mutex> g(mu_);
    box_[{src, tag}].emplace_back(payload.begin() + sizeof tag, payload.end());
  }
  arrived_.notify_all();
}

std::vector<std::byte> Mailbox::receive(int src, uint64_t tag, const char* what) {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    auto it = box_.find({src, tag});
    if (it != box_.end() && !it->second.empty()) {
      std::vector<std::byte> out = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) box_.erase(it);
      return out;
    }
    // Woken by keep(); the timeout is only for noticing a sender that died.
    if (arrived_.wait_for(g, kLivenessLook) == std::cv_status::timeout) {
      g.unlock();
      peers_.check(src, what);
      g.lock();
    }
  }
}

uint64_t Mailbox::sequence(int peer, uint64_t family) {
  std::lock_guard<std::mutex> g(mu_);
  return sequences_[{peer, family}]++;
}

size_t Mailbox::kept() const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (const auto& [key, q] : box_) n += q.size();
  return n;
}

}  // namespace loom::runtime
