// y = x + bias[c]
#pragma once

#include "per_channel.hpp"

namespace opfuse {

struct BiasAdd {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        span<const float> bias;  // one value per output channel
    };
    explicit BiasAdd(const params& p) : bias_(p.bias, "BiasAdd bias") {}

    index_t channels() const { return bias_.size(); }
    const detail::channel_values& bias() const { return bias_; }

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site& s) const {
        return x + bias_.at<Arch>(s);
    }

private:
    detail::channel_values bias_;
};

}  // namespace opfuse
