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

namespace opfuse::detail {

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> fast_erf(xsimd::batch<float, Arch> x) {
    using B = xsimd::batch<float, Arch>;
    x = xsimd::min(xsimd::max(x, B(-3.92f)), B(3.92f));
    const B t = x * x;
    B p = xsimd::fma(B(1.989110087e-08f), t, B(-1.969089388e-06f));
    p = xsimd::fma(p, t, B(1.444204997e-04f));
    p = xsimd::fma(p, t, B(3.803952074e-03f));
    p = xsimd::fma(p, t, B(5.089227068e-02f));
    p = xsimd::fma(p, t, B(2.022799667e-01f));
    p = xsimd::fma(p, t, B(1.128379167e+00f));
    B q = xsimd::fma(B(9.812398663e-04f), t, B(1.455890985e-02f));
    q = xsimd::fma(q, t, B(1.159784750e-01f));
    q = xsimd::fma(q, t, B(5.125973516e-01f));
    q = xsimd::fma(q, t, B(1.f));
    return x * p / q;
}

}  // namespace opfuse::detail
