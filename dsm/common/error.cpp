#include "loom/dsm/common/error.hpp"

#include <cerrno>
#include <cstring>

namespace loom {

SystemError::SystemError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err)), err_(err) {}

void fail_errno(const std::string& what) { throw SystemError(what, errno); }

}  // namespace loom
