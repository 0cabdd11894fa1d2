// y = tanh(x)
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct Tanh {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    struct params {};
    explicit Tanh(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return xsimd::tanh(x);
    }
};

}  // namespace opfuse
