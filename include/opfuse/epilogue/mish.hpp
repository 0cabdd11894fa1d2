// y = x * tanh(softplus(x)) = x * tanh(log(1 + exp(x)))
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
        // softplus(x) = x for large x (exp would overflow); tanh saturates to 1 long before that.
        B softplus = xsimd::select(x > B(20.f), x, xsimd::log1p(xsimd::exp(xsimd::min(x, B(20.f)))));
        return x * xsimd::tanh(softplus);
    }
};

}  // namespace opfuse
