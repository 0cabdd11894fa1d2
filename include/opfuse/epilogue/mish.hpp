// y = x * tanh(softplus(x)) = x * tanh(log(1 + exp(x))), evaluated as x * n / (n + 2) with
// n = e (e + 2), e = exp(x): with s = 1 + e, tanh(log s) = (s^2 - 1) / (s^2 + 1) and s^2 - 1 = e (e + 2).
// One exp and one division, no log1p or tanh, and no cancellation: for x -> -inf, n -> 2e and y -> x e.
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct Mish {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    struct params {};
    explicit Mish(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        using B = xsimd::batch<float, Arch>;
        // Past x = 20, n / (n + 2) rounds to 1 (n > 2e17) and y = x; the clamp keeps n finite.
        const B e = xsimd::exp(xsimd::min(x, B(20.f)));
        const B n = e * (e + B(2.f));
        return x * n / (n + B(2.f));
    }
};

}  // namespace opfuse
