// Argument checking: every public entry point validates its inputs and throws std::invalid_argument
// naming the offending shapes before it writes a byte.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace opfuse::detail {

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    std::ostringstream msg;
    msg << "opfuse: ";
    (msg << ... << parts);
    throw std::invalid_argument(msg.str());
}

template <class... Parts>
void require(bool ok, const Parts&... parts) {
    if (!ok) fail(parts...);
}

}  // namespace opfuse::detail
