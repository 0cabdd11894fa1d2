// GELU, both forms of PyTorch nn.GELU:
//   erf  (approximate = none): y = 0.5 x (1 + erf(x / sqrt 2))
//   tanh (approximate = tanh): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#pragma once

#include "../core/config.hpp"
#include "site.hpp"

namespace opfuse {

struct GELU {
    static constexpr bool pixel_lanes = true;  // see site.hpp
    enum class Approximate { none, tanh };
    struct params {
        Approximate approximate = Approximate::none;
    };
    explicit GELU(const params& p) : tanh_form_(p.approximate == Approximate::tanh) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        using B = xsimd::batch<float, Arch>;
        if (tanh_form_) {
            B inner = B(0.7978845608028654f) * xsimd::fma(B(0.044715f) * x, x * x, x);
            return B(0.5f) * x * (B(1.f) + xsimd::tanh(inner));
        }
        return B(0.5f) * x * (B(1.f) + xsimd::erf(x * B(0.7071067811865476f)));
    }

private:
    bool tanh_form_;
};

}  // namespace opfuse
