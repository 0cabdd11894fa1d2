// y = x * m, where m is a tensor shaped like the output (a gate), passed at call time.
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct Mul {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {};
    static constexpr bool reads_tensor = true;
    explicit Mul(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&,
                                                         xsimd::batch<float, Arch> m) const {
        return x * m;
    }
};

}  // namespace opfuse
