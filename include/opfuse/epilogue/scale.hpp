// y = x * scale[c]
#pragma once

#include "per_channel.hpp"

namespace opfuse {

struct Scale {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        span<const float> scale;  // one value per output channel
    };
    explicit Scale(const params& p) : scale_(p.scale, "Scale") {}

    index_t channels() const { return scale_.size(); }

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site& s) const {
        return x * scale_.at<Arch>(s);
    }

private:
    detail::channel_values scale_;
};

}  // namespace opfuse
