#pragma once
// Errors raised by Loom. Every error names what was wrong and with which value, so that
// a failing rank's one line of output is enough to find the cause.
#include <stdexcept>
#include <string>
#include <sstream>
#include <utility>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Raised when an operating-system call fails; carries errno.
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
  int code() const noexcept { return err_; }

 private:
  int err_;
};

namespace detail {
template <typename... A>
std::string concat(A&&... a) {
  std::ostringstream os;
  (os << ... << std::forward<A>(a));
  return os.str();
}
}  // namespace detail

template <typename... A>
[[noreturn]] void fail(A&&... a) {
  throw Error(detail::concat(std::forward<A>(a)...));
}

// Throws SystemError with errno captured at the call site.
[[noreturn]] void fail_errno(const std::string& what);

}  // namespace loom
