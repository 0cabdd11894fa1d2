// y = tanh(x), as detail::fast_tanh: a branch-free rational function within 4e-7 relative (see there).
#pragma once

#include "../core/config.hpp"
#include "../core/fast_tanh.hpp"
#include "site.hpp"

namespace opfuse {

struct Tanh {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    struct params {};
    explicit Tanh(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return detail::fast_tanh(x);
    }
};

}  // namespace opfuse
