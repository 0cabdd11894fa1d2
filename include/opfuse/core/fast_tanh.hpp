// tanh(x) as one branch-free rational function: tanh(x) ~ x P(x^2) / Q(x^2) on |x| <= 7.9 (the input is
// clamped there: 1 - tanh(7.9) = 2.7e-7, under the approximation's own error), P and Q of degree 4 with
// P(0) = Q(0) = 1, so the relative error stays small down to the denormals. Coefficients fitted here
// (iteratively reweighted least squares towards minimax relative error, in double, against numpy's tanh):
// the rational function is within 6e-9 of tanh relative to it on [0, 7.9]; evaluated in float, within
// 4e-7 relative (7 ulp of 1) over the whole line, with or without hardware FMA, and never above 1 in
// magnitude.
//
// Why not xsimd::tanh: it branches on |x| < 0.625 and evaluates a polynomial on one side, an exp and a
// division on the other; a vector that mixes small and large |x| (every activation input) takes both.
// This is a clamp, 8 FMAs, two multiplications and one division (odd_rational.hpp), and NaN propagates.
#pragma once

#include "config.hpp"
#include "odd_rational.hpp"

namespace opfuse::detail {

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> fast_tanh(xsimd::batch<float, Arch> x) {
    static constexpr float p[] = {1.549019101e-08f, 2.206730684e-05f, 3.581664248e-03f, 1.345287604e-01f, 1.f};
    static constexpr float q[] = {8.623934834e-07f, 3.428019288e-04f, 2.620241743e-02f, 4.678620581e-01f, 1.f};
    return clamped_odd_rational(x, 7.9f, p, q);
}

}  // namespace opfuse::detail
