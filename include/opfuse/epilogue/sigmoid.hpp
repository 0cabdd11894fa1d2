// y = 1 / (1 + exp(-x))
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

namespace detail {
template <class B>
OPFUSE_ALWAYS_INLINE B sigmoid(B x) {
    return B(1.f) / (B(1.f) + xsimd::exp(-x));
}
}  // namespace detail

struct Sigmoid {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    struct params {};
    explicit Sigmoid(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return detail::sigmoid(x);
    }
};

}  // namespace opfuse
