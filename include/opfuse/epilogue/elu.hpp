// y = x > 0 ? x : alpha * (exp(x) - 1)
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct Elu {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    struct params {
        float alpha = 1.f;
    };
    explicit Elu(const params& p) : alpha_(p.alpha) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        using B = xsimd::batch<float, Arch>;
        // expm1 keeps precision near 0; min() keeps exp from overflowing on lanes that select x anyway.
        return xsimd::select(x > B(0.f), x, B(alpha_) * xsimd::expm1(xsimd::min(x, B(0.f))));
    }

private:
    float alpha_;
};

}  // namespace opfuse
