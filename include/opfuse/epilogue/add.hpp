// y = x + r, where r is a tensor shaped like the output (a residual connection), passed at call time:
//   fused<Conv2d, BatchNorm, Add, Relu> block(...);  block(input, output, residual);
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct Add {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {};
    static constexpr bool reads_tensor = true;
    explicit Add(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&,
                                                         xsimd::batch<float, Arch> r) const {
        return x + r;
    }
};

}  // namespace opfuse
