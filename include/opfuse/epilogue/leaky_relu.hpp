// y = x >= 0 ? x : alpha * x
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct LeakyRelu {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        float alpha = 0.01f;
    };
    explicit LeakyRelu(const params& p) : alpha_(p.alpha) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        using B = xsimd::batch<float, Arch>;
        return xsimd::select(x >= B(0.f), x, x * B(alpha_));
    }

private:
    float alpha_;
};

}  // namespace opfuse
