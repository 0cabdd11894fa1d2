// erf(x) for GELU as one branch-free rational function: erf(x) ~ x P(x^2) / Q(x^2) on |x| <= 3.92 (the
// input is clamped there: erf(3.92) rounds to 1 in float), P of degree 6 with P(0) = 2/sqrt(pi), Q of
// degree 4. Coefficients fitted here (iteratively reweighted least squares towards minimax, in double,
// against scipy.special.erf): the rational function is within 5e-8 of erf; evaluated in float, within
// 4.1e-7 (7 ulp of 1) over the whole line, with or without hardware FMA (3.9e-7 / 4.0e-7 measured).
//
// Why not xsimd::erf: it is accurate to 1-2 ulp but branches on |x| < 2/3, evaluates two polynomials, an exp
// and a division, and tests for infinities; any vector mixing small and large |x| (every GELU input) takes
// both paths. This is a clamp, 10 FMAs, two multiplications and one division (speed measured in
// docs/performance.md, "GELU").
#pragma once

#include "config.hpp"
#include "odd_rational.hpp"

namespace opfuse::detail {

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> fast_erf(xsimd::batch<float, Arch> x) {
    static constexpr float p[] = {1.989110087e-08f, -1.969089388e-06f, 1.444204997e-04f, 3.803952074e-03f,
                                  5.089227068e-02f, 2.022799667e-01f,  1.128379167e+00f};
    static constexpr float q[] = {9.812398663e-04f, 1.455890985e-02f, 1.159784750e-01f, 5.125973516e-01f, 1.f};
    return clamped_odd_rational(x, 3.92f, p, q);
}

}  // namespace opfuse::detail
