// y = x * relu6(x + 3) / 6   (PyTorch nn.Hardswish, MobileNetV3)
#pragma once

#include "hard_sigmoid.hpp"

namespace opfuse {

struct HardSwish {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {};
    explicit HardSwish(const params& = {}) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return x * detail::hard_sigmoid(x, 1.f / 6.f, 0.5f);
    }
};

}  // namespace opfuse
