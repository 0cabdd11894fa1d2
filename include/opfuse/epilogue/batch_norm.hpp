// Inference BatchNorm: y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c], precomputed at
// construction as y = x * scale[c] + shift[c]. Directly after a conv it is folded into the weights.
#pragma once

#include <cmath>

#include "per_channel.hpp"

namespace opfuse {

struct BatchNorm {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        span<const float> gamma, beta, mean, var;
        float eps = 1e-5f;
    };
    explicit BatchNorm(const params& p) {
        const std::size_t c = p.gamma.size();
        detail::require(c > 0 && p.beta.size() == c && p.mean.size() == c && p.var.size() == c,
                        "BatchNorm: gamma, beta, mean and var must have the same non-zero length; got ",
                        p.gamma.size(), ", ", p.beta.size(), ", ", p.mean.size(), ", ", p.var.size());
        detail::require(p.gamma.data() && p.beta.data() && p.mean.data() && p.var.data(),
                        "BatchNorm: null parameter pointer");
        detail::require(p.eps >= 0.f, "BatchNorm: eps must be >= 0, got ", p.eps);
        auto scale = [&](index_t i) {
            return static_cast<float>(p.gamma[i] / std::sqrt(static_cast<double>(p.var[i]) + p.eps));
        };
        scale_ = detail::channel_values::generate(static_cast<index_t>(c), scale);
        shift_ = detail::channel_values::generate(static_cast<index_t>(c), [&](index_t i) {
            return static_cast<float>(p.beta[i] - static_cast<double>(p.mean[i]) * scale_[i]);
        });
    }

    index_t channels() const { return scale_.size(); }
    const detail::channel_values& scale() const { return scale_; }
    const detail::channel_values& shift() const { return shift_; }

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site& s) const {
        return xsimd::fma(x, scale_.at<Arch>(s), shift_.at<Arch>(s));
    }

private:
    detail::channel_values scale_, shift_;
};

}  // namespace opfuse
