// static_for<N>(f) calls f(std::integral_constant<int, i>{}) for i = 0..N-1, fully unrolled at compile time.
// Micro-kernels use it so that register tiles (arrays of SIMD vectors) are indexed only by constants and
// therefore live in registers.
#pragma once

#include <type_traits>
#include <utility>

#include "config.hpp"

namespace opfuse::detail {

template <class F, int... I>
OPFUSE_ALWAYS_INLINE void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
}

template <int N, class F>
OPFUSE_ALWAYS_INLINE void static_for(F&& f) {
    static_for_impl(f, std::make_integer_sequence<int, N>{});
}

}  // namespace opfuse::detail
