#pragma once
// Function identity for remote calls (seed 000 §4.3). A call names its function by a 32-bit id
// that the receiver looks up among the functions this program registered — never by a code
// address. Ids are hashes of names that are identical in every process of one program:
//  * automatic: every (lambda type, call kind) used remotely has an entry type whose
//    type_info name is hashed; it registers itself during static initialisation, so every
//    process knows every id before main() runs;
//  * explicit: register_function("name", fn) — the id is the hash of the name.
// Two names that hash alike are refused at registration, loudly.
#include <cstdint>
#include <cstring>
#include <new>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/invoke/wire.hpp"

namespace loom::invoke {

class Inbox;

// What the receiver knows about the call it is running.
struct Incoming {
  int src_rank = -1;
  const uint8_t* captures = nullptr;  // the lambda's bytes
  size_t capture_len = 0;
  std::span<std::byte> buffer;        // Buffer / Written / Read / Named
  const wire::ReturnDesc* ret = nullptr;
  Inbox* inbox = nullptr;
};

using EntryFn = void (*)(const Incoming&);

// Explicitly registered functions take the argument bytes the caller sent.
using NamedFn = void (*)(int src_rank, std::span<const std::byte> args);

struct Entry {
  EntryFn fn = nullptr;
  NamedFn named = nullptr;
  wire::Kind kind = wire::Kind::Call;
  uint32_t capture_size = 0;
  std::string name;     // the key its id hashes ("auto:<type>", "name:<name>")
  std::string display;  // for people: the demangled entry type, or the registered name
};

class Registry {
 public:
  static Registry& instance();
  static uint32_t hash(std::string_view key);
  // Registers `fn` under `key`; the id is hash(key). Re-registering the same key with the same
  // function is harmless; another key with the same hash is an error.
  uint32_t add(std::string_view key, EntryFn fn, wire::Kind kind, uint32_t capture_size, NamedFn named = nullptr);
  bool lookup(uint32_t id, Entry* out) const;
  size_t size() const;
  // Every function, (id, display name), by id: what start-up compares between processes.
  std::vector<std::pair<uint32_t, std::string>> listing() const;

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<uint32_t, Entry> entries_;
};

namespace detail {

template <typename F>
constexpr void check_capture() {
  static_assert(std::is_trivially_copyable_v<std::decay_t<F>>,
                "loom::invoke: a remotely called function's captures must be trivially copyable "
                "(capture values and pointers into shared/registered memory, not std::string or std::vector)");
  static_assert(sizeof(std::decay_t<F>) <= wire::kMaxFrame / 2, "loom::invoke: captures too large for one call");
}

// Copies the captures out of the (8-aligned but possibly unsuitably aligned) wire bytes into a
// properly aligned object; trivially copyable closures begin their lifetime by the copy.
template <typename F>
struct Closure {
  alignas(F) unsigned char storage[sizeof(F)];
  // Captureless closures travel as zero bytes.
  explicit Closure(const uint8_t* bytes) {
    if constexpr (std::is_empty_v<F>) std::memset(storage, 0, sizeof(F));
    else std::memcpy(storage, bytes, sizeof(F));
  }
  F& get() { return *std::launder(reinterpret_cast<F*>(storage)); }
};

void write_return(const Incoming& in, const void* value, size_t size);

template <typename F>
struct CallEntry {
  static constexpr wire::Kind kKind = wire::Kind::Call;
  static void run(const Incoming& in) {
    Closure<F> c(in.captures);
    c.get()();
  }
};
template <typename F, wire::Kind K>
struct BufferEntry {
  static constexpr wire::Kind kKind = K;
  static void run(const Incoming& in) {
    Closure<F> c(in.captures);
    c.get()(in.buffer);
  }
};
template <typename F>
struct ReturnEntry {
  static constexpr wire::Kind kKind = wire::Kind::Return;
  using R = std::invoke_result_t<F&>;
  static void run(const Incoming& in) {
    Closure<F> c(in.captures);
    R r = c.get()();
    write_return(in, &r, sizeof r);
  }
};

template <typename Tag, typename F>
struct AutoId {
  static const uint32_t value;
};
template <typename Tag, typename F>
const uint32_t AutoId<Tag, F>::value =
    Registry::instance().add(std::string("auto:") + typeid(Tag).name(), &Tag::run, Tag::kKind,
                             static_cast<uint32_t>(std::is_empty_v<F> ? 0 : sizeof(F)));

}  // namespace detail

// The id of lambda/function-object type F called with kind K (registered automatically).
template <typename Tag, typename F>
inline uint32_t auto_id() {
  return detail::AutoId<Tag, F>::value;
}

uint32_t register_function(std::string_view name, NamedFn fn);
uint32_t function_id(std::string_view name);

}  // namespace loom::invoke
