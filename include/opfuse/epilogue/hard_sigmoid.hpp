// y = clamp(alpha * x + beta, 0, 1). The defaults are PyTorch's nn.Hardsigmoid (relu6(x + 3) / 6);
// ONNX HardSigmoid uses alpha = 0.2, beta = 0.5.
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

namespace detail {
template <class B>
OPFUSE_ALWAYS_INLINE B hard_sigmoid(B x, float alpha, float beta) {
    return xsimd::min(xsimd::max(xsimd::fma(x, B(alpha), B(beta)), B(0.f)), B(1.f));
}
}  // namespace detail

struct HardSigmoid {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    static constexpr bool cheap = true;
    struct params {
        float alpha = 1.f / 6.f;
        float beta = 0.5f;
    };
    explicit HardSigmoid(const params& p) : alpha_(p.alpha), beta_(p.beta) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return detail::hard_sigmoid(x, alpha_, beta_);
    }

private:
    float alpha_, beta_;
};

}  // namespace opfuse
