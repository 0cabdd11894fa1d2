// The activations that replace a library call by their own approximation, on a dense grid over the whole
// line (both tails, the clamps) plus +-0, +-inf and NaN, against <cmath> in double. The bounds are the
// ones their headers state; a wrong coefficient moves the error past them by orders of magnitude. (The
// epilogue tests check every activation inside conv chains, against a looser bound for composed errors.)
#include <catch2/catch.hpp>

#include <opfuse/core/fast_erf.hpp>
#include <opfuse/core/fast_tanh.hpp>
#include <opfuse/epilogue/mish.hpp>
#include <opfuse/reference/epilogues.hpp>

#include <cmath>

// The functions are called here directly, outside any opfuse header that silences GCC 12's false
// uninitialized warnings on its own AVX-512 intrinsics (bug 105593; see opfuse.hpp), so silence them here.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

using B = xsimd::batch<float, opfuse::default_arch>;
constexpr int S = int(B::size);

constexpr double kErfAbsBound = 4.1e-7;    // core/fast_erf.hpp
constexpr double kTanhRelBound = 4e-7;     // core/fast_tanh.hpp
constexpr double kMishRelBound = 10 * 0x1p-24;  // exp (1-2 ulp) and four roundings: ~5 u measured

struct Worst {
    double error = 0, at = 0;
    void add(double e, double x) {
        if (e > error) error = e, at = x;
    }
};

// f on `count` points evenly spread over [lo, hi]; err(x, y) is the error of y = f(x).
template <class F, class Err>
Worst sweep(F f, float lo, float hi, int count, Err err) {
    Worst w;
    alignas(64) float x[S], y[S];
    for (int i = 0; i < count; i += S) {
        for (int l = 0; l < S; ++l) x[l] = lo + (hi - lo) * float(i + l) / float(count);
        f(B::load_aligned(x)).store_aligned(y);
        for (int l = 0; l < S; ++l) w.add(err(double(x[l]), double(y[l])), x[l]);
    }
    return w;
}

// f at one point.
template <class F>
float at(F f, float x) {
    alignas(64) float y[S];
    f(B(x)).store_aligned(y);
    return y[0];
}

}  // namespace

TEST_CASE("fast_erf: within 4.1e-7 of erf on the whole line", "[epilogue][gelu]") {
    auto f = [](B x) { return opfuse::detail::fast_erf(x); };
    const Worst w = sweep(f, -6.f, 6.f, 400000, [](double x, double y) { return std::fabs(y - std::erf(x)); });
    INFO("worst error " << w.error << " at x = " << w.at);
    CHECK(w.error <= kErfAbsBound);
    // erf(+-0) = +-0 exactly; +-inf is clamped to +-3.92, which is within the same bound of +-1 (with or
    // without hardware FMA, whose absence changes the rounding of the polynomials).
    CHECK((at(f, -0.f) == 0.f && std::signbit(at(f, -0.f))));
    CHECK((at(f, 0.f) == 0.f && !std::signbit(at(f, 0.f))));
    CHECK(std::fabs(at(f, INFINITY) - 1.0) <= kErfAbsBound);
    CHECK(std::fabs(at(f, -INFINITY) + 1.0) <= kErfAbsBound);
}

TEST_CASE("fast_tanh: within 4e-7 of tanh relative to it, never above 1", "[epilogue]") {
    auto f = [](B x) { return opfuse::detail::fast_tanh(x); };
    auto rel = [](double x, double y) { return x == 0 ? std::fabs(y) : std::fabs(y / std::tanh(x) - 1); };
    const Worst w = sweep(f, -12.f, 12.f, 2400000, rel);
    INFO("worst relative error " << w.error << " at x = " << w.at);
    CHECK(w.error <= kTanhRelBound);
    // Relative accuracy down to the denormals (tanh(x) = x there), on both sides.
    Worst tiny;
    for (float x = 1e-40f; x < 1.f; x *= 1.1f) {
        tiny.add(rel(x, at(f, x)), x);
        tiny.add(rel(-x, at(f, -x)), -x);
    }
    INFO("worst relative error near 0: " << tiny.error << " at x = " << tiny.at);
    CHECK(tiny.error <= kTanhRelBound);
    const Worst magnitude = sweep(f, -12.f, 12.f, 24000, [](double, double y) { return std::fabs(y); });
    CHECK(magnitude.error <= 1.0);
    CHECK((at(f, -0.f) == 0.f && std::signbit(at(f, -0.f))));
    CHECK(std::fabs(at(f, INFINITY) - 1.0) <= kTanhRelBound);
    CHECK(std::fabs(at(f, -INFINITY) + 1.0) <= kTanhRelBound);
    CHECK(std::isnan(at(f, NAN)));
}

TEST_CASE("Mish: x n / (n + 2) within 10 u of x tanh(softplus(x))", "[epilogue]") {
    const opfuse::Mish mish;
    auto f = [&](B x) { return mish.apply(x, opfuse::Site{}); };
    auto rel = [](double x, double y) {
        const double r = opfuse::reference::mish(x);
        return std::fabs(r) < 1e-30 ? std::fabs(y - r) : std::fabs(y / r - 1);  // exp underflows below -87
    };
    const Worst w = sweep(f, -100.f, 100.f, 2400000, rel);
    INFO("worst relative error " << w.error << " at x = " << w.at);
    CHECK(w.error <= kMishRelBound);
    CHECK(at(f, 1e6f) == 1e6f);  // past the clamp at 20: y = x
    CHECK(at(f, INFINITY) == INFINITY);
    CHECK((at(f, -0.f) == 0.f && std::signbit(at(f, -0.f))));
    CHECK(std::isnan(at(f, NAN)));
}
