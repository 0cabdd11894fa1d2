// x P(x^2) / Q(x^2) on x clamped to [-limit, limit]: the form of the odd activations opfuse approximates
// itself (fast_erf, fast_tanh). P and Q are given highest degree first and evaluated by Horner's rule in
// FMAs. NaN propagates through the clamp: x stays the second operand of max/min, the operand x86's
// maxps/minps return when either is NaN.
#pragma once

#include <cstddef>

#include "config.hpp"
#include "static_for.hpp"

namespace opfuse::detail {

template <class Arch, std::size_t NP, std::size_t NQ>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> clamped_odd_rational(xsimd::batch<float, Arch> x, float limit,
                                                                    const float (&p)[NP], const float (&q)[NQ]) {
    static_assert(NP >= 2 && NQ >= 2, "clamped_odd_rational: P and Q of degree >= 1");
    using B = xsimd::batch<float, Arch>;
    x = xsimd::min(B(limit), xsimd::max(B(-limit), x));
    const B t = x * x;
    auto horner = [&t](const auto& c) OPFUSE_UNROLLED {
        constexpr int N = int(sizeof(c) / sizeof(c[0]));
        B r = xsimd::fma(B(c[0]), t, B(c[1]));
        static_for<N - 2>([&](auto i) OPFUSE_UNROLLED { r = xsimd::fma(r, t, B(c[i + 2])); });
        return r;
    };
    return x * horner(p) / horner(q);
}

}  // namespace opfuse::detail
