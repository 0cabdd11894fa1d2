// y = min(max(x, lo), hi); Relu6 is Clamp(0, 6).
#pragma once

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "site.hpp"

namespace opfuse {

struct Clamp {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        float min = 0.f;
        float max = 6.f;
    };
    explicit Clamp(const params& p) : lo_(p.min), hi_(p.max) {
        detail::require(p.min <= p.max, "Clamp: min (", p.min, ") must not exceed max (", p.max, ")");
    }

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        using B = xsimd::batch<float, Arch>;
        return xsimd::min(xsimd::max(x, B(lo_)), B(hi_));
    }

private:
    float lo_, hi_;
};

struct Relu6 {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {};
    explicit Relu6(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        using B = xsimd::batch<float, Arch>;
        return xsimd::min(xsimd::max(x, B(0.f)), B(6.f));
    }
};

}  // namespace opfuse
