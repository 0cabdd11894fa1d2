// y = x * sigmoid(x)   (a.k.a. Swish)
#pragma once

#include "sigmoid.hpp"

namespace opfuse {

struct SiLU {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    struct params {};
    explicit SiLU(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return x * detail::sigmoid(x);
    }
};

}  // namespace opfuse
