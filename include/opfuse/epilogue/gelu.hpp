// GELU, both forms of PyTorch nn.GELU:
//   erf  (approximate = none): y = 0.5 x (1 + erf(x / sqrt 2))
//   tanh (approximate = tanh): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// The erf form runs detail::fast_erf (a branch-free rational function, |error| <= 4.1e-7: see there); the
// tanh form uses 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), one exp and one division instead of xsimd::tanh's
// two branches (and no cancellation in 1 + tanh(u) for large negative x).
#pragma once

#include "../core/config.hpp"
#include "../core/fast_erf.hpp"
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
            const B minus_2u = B(-1.5957691216057308f) * xsimd::fma(B(0.044715f) * x, x * x, x);  // -2 sqrt(2/pi) (...)
            return x / (B(1.f) + xsimd::exp(minus_2u));
        }
        const B half_x = B(0.5f) * x;
        return xsimd::fma(half_x, detail::fast_erf(x * B(0.7071067811865476f)), half_x);
    }

private:
    bool tanh_form_;
};

}  // namespace opfuse
