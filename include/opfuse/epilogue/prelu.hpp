// y = x >= 0 ? x : slope[c] * x   (per-channel slopes, PyTorch nn.PReLU(num_parameters=C))
#pragma once

#include "per_channel.hpp"

namespace opfuse {

struct PRelu {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        span<const float> slope;  // one value per output channel
    };
    explicit PRelu(const params& p) : slope_(p.slope, "PRelu slope") {}

    index_t channels() const { return slope_.size(); }

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site& s) const {
        return xsimd::select(x >= xsimd::batch<float, Arch>(0.f), x, x * slope_.at<Arch>(s));
    }

private:
    detail::channel_values slope_;
};

}  // namespace opfuse
