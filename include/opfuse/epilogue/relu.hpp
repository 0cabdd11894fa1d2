// y = max(x, 0)
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct Relu {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {};
    explicit Relu(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return xsimd::max(x, xsimd::batch<float, Arch>(0.f));
    }
};

}  // namespace opfuse
