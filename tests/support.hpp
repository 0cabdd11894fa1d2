// Shared fixtures for the opfuse tests: seeded random data, tensors in caller memory (dense NHWC/NCHW and
// strided views inside larger buffers with guard regions), the double-precision reference (conv from
// opfuse::reference, then the epilogue formulas), and the comparison with a per-element error bound.
//
// ------------------------------------------------------------------------------------------------------
// Tolerance model (u = 2^-24, the fp32 unit roundoff)
//
// Conv: the kernel accumulates L = (C_in / groups) * KH * KW products in fp32 (FMA: the product is exact,
// each step rounds the running sum once). The reference sums the same products exactly enough in double.
// Recursive summation has |error| <= sum_k u*|s_k| <= L * u * A, with A = sum |x_i * w_i| (computed by
// the reference on |x| and |w|); with independent rounding errors it is a random walk of standard
// deviation <= u * sqrt(L/3) * A. We allow
//       |got - ref| <= kConvSlack * u * sqrt(L) * A              (kConvSlack = 8, i.e. > 13 sigma)
// Scaling by A (not by |ref|) is what makes the bound both safe under cancellation and tight: a missing
// or duplicated tap changes the result by about A / L, which exceeds the bound as soon as
// L^1.5 < 1 / (8u) ~ 2.1e6, i.e. for every shape in this suite (L <= 65*49 = 3185 -> margin ~12x).
//
// Epilogues: the bound is propagated through the chain in double alongside the value,
//       err_out = Lip(f) * err_in + own_error(f),
// where Lip is a bound on |f'| and own_error is f's fp32 rounding: one or two roundings (<= 2u relative)
// for add/mul/fma/min/max/select ops, and kTranscSlack * u for the transcendental ones. These are
// looser because xsimd's exp/expm1 and opfuse's tanh/erf approximations are accurate to a few ulp, and
// sigmoid/SiLU/Mish compose two or three of them. GELU and HardSwish also get a |x| term: they compute
// x * (1 + erf(.)) / x * clamp(x/6 + 1/2), which cancel for negative x, so their rounding error is
// absolute (about u * |x|), not relative to the (tiny) result.
// ------------------------------------------------------------------------------------------------------
#pragma once

#include <catch2/catch.hpp>

#include <opfuse/opfuse.hpp>
#include <opfuse/reference/conv2d.hpp>
#include <opfuse/reference/epilogues.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace test {

using opfuse::conv2d_params;
using opfuse::index_t;
using opfuse::TensorView;

constexpr double u32 = 0x1p-24;       // fp32 unit roundoff
constexpr double kConvSlack = 8.0;    // see the header comment
constexpr double kExactSlack = 2.0;   // add / mul / fma / min / max: at most two roundings
constexpr double kTranscSlack = 16.0; // exp, expm1, log1p, tanh, erf and their compositions
constexpr double kTiny = 1e-30;       // absolute floor (underflow of exp in sigmoid and friends)

inline std::size_t sz(index_t i) { return static_cast<std::size_t>(i); }

// ---------------------------------------------------------------------------------------------- data

inline std::vector<float> uniform(std::size_t n, float lo, float hi, std::mt19937& g) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// Logical (N, C, H, W) activation data, row-major. Every pixel gets its own amplitude in
// {0.03, 0.3, 1, 3}, so one tensor yields conv outputs near zero and far into the saturation of the
// activations (|x| up to ~50 with the epilogue tests' weight scale).
inline std::vector<float> activation_data(index_t n, index_t c, index_t h, index_t w, std::mt19937& g) {
    static const float amp[4] = {0.03f, 0.3f, 1.f, 3.f};
    std::uniform_int_distribution<int> pick(0, 3);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> a(sz(n * h * w));
    for (auto& x : a) x = amp[pick(g)];
    std::vector<float> v(sz(n * c * h * w));
    for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j < c; ++j)
            for (index_t y = 0; y < h; ++y)
                for (index_t x = 0; x < w; ++x)
                    v[sz(((i * c + j) * h + y) * w + x)] = d(g) * a[sz((i * h + y) * w + x)];
    return v;
}

// Values of the tensors read by Add/Mul: U(-1, 1) times an amplitude in {0.1, 1, 5, 40} drawn per
// element, so an activation placed after an Add sees values near 0, moderate ones, and saturation.
inline std::vector<float> operand_values(std::size_t n, std::mt19937& g) {
    static const float amp[4] = {0.1f, 1.f, 5.f, 40.f};
    std::uniform_int_distribution<int> pick(0, 3);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g) * amp[pick(g)];
    return v;
}

// ------------------------------------------------------------------------------------------- tensors

// How a tensor is stored in caller memory.
enum class Store {
    NHWC,
    NCHW,
    NHWCSlice,  // channels [2, 2 + C) of an NHWC buffer with C + 5 channels (strided, stride(1) == 1)
    NCHWPitch,  // NCHW with a row pitch of W + 3 and a plane pitch of (H + 1) * (W + 3) (strided)
};

inline const char* to_string(Store s) {
    switch (s) {
        case Store::NHWC: return "NHWC";
        case Store::NCHW: return "NCHW";
        case Store::NHWCSlice: return "NHWC-channel-slice";
        case Store::NCHWPitch: return "NCHW-row-pitch";
    }
    return "?";
}

constexpr std::size_t kGuard = 7;  // floats before and after the footprint (odd: views start unaligned)
constexpr float kSentinel = -1234.5f;

// A rank-4 tensor in a std::vector, plus the mask of buffer elements that belong to the view.
struct Tensor {
    std::vector<float> buf;
    std::vector<unsigned char> mask;
    TensorView<float, 4> view;

    Tensor() = default;
    Tensor(Store s, index_t n, index_t c, index_t h, index_t w, float fill) {
        std::array<index_t, 4> st{};
        index_t footprint = 0, origin = 0;
        switch (s) {
            case Store::NHWC: st = {h * w * c, 1, w * c, c}; footprint = n * h * w * c; break;
            case Store::NCHW: st = {c * h * w, h * w, w, 1}; footprint = n * c * h * w; break;
            case Store::NHWCSlice: {
                const index_t ct = c + 5;
                st = {h * w * ct, 1, w * ct, ct};
                footprint = n * h * w * ct;
                origin = 2;
                break;
            }
            case Store::NCHWPitch: {
                const index_t pitch = w + 3, plane = (h + 1) * pitch;
                st = {c * plane, plane, pitch, 1};
                footprint = n * c * plane;
                break;
            }
        }
        buf.assign(sz(footprint) + 2 * kGuard, fill);
        mask.assign(buf.size(), 0);
        view = TensorView<float, 4>(buf.data() + kGuard + origin, {n, c, h, w}, st);
        for (index_t i = 0; i < n; ++i)
            for (index_t j = 0; j < c; ++j)
                for (index_t y = 0; y < h; ++y)
                    for (index_t x = 0; x < w; ++x) mask[sz(kGuard + origin + view.offset(i, j, y, x))] = 1;
    }

    // Writes logical NCHW data into the view.
    void set(const std::vector<float>& nchw_data) {
        const auto& v = view;
        for (index_t i = 0; i < v.n(); ++i)
            for (index_t j = 0; j < v.c(); ++j)
                for (index_t y = 0; y < v.h(); ++y)
                    for (index_t x = 0; x < v.w(); ++x)
                        v(i, j, y, x) = nchw_data[sz(((i * v.c() + j) * v.h() + y) * v.w() + x)];
    }
    TensorView<const float, 4> cview() const { return view; }

    // Number of buffer elements outside the view that differ (bitwise) from `fill`.
    std::size_t touched_outside(float fill) const {
        std::size_t bad = 0;
        for (std::size_t i = 0; i < buf.size(); ++i)
            if (!mask[i] && std::memcmp(&buf[i], &fill, sizeof(float)) != 0) ++bad;
        return bad;
    }
    // Number of buffer elements anywhere that differ (bitwise) from `fill`.
    std::size_t touched_anywhere(float fill) const {
        std::size_t bad = 0;
        for (float x : buf)
            if (std::memcmp(&x, &fill, sizeof(float)) != 0) ++bad;
        return bad;
    }
    // Logical NCHW copy of the view.
    std::vector<float> get() const {
        const auto& v = view;
        std::vector<float> r(sz(v.size()));
        for (index_t i = 0; i < v.n(); ++i)
            for (index_t j = 0; j < v.c(); ++j)
                for (index_t y = 0; y < v.h(); ++y)
                    for (index_t x = 0; x < v.w(); ++x) r[sz(((i * v.c() + j) * v.h() + y) * v.w() + x)] = v(i, j, y, x);
        return r;
    }
};

// An input tensor: the logical data in storage `s`; every buffer element outside the view is NaN, so a
// kernel that reads (and uses) memory it does not own produces NaN.
inline Tensor input_tensor(Store s, index_t n, index_t c, index_t h, index_t w, const std::vector<float>& data) {
    Tensor t(s, n, c, h, w, std::numeric_limits<float>::quiet_NaN());
    t.set(data);
    return t;
}

// ----------------------------------------------------------------------------------------- conv case

struct ConvCase {
    index_t cin = 1, cout = 1, kh = 1, kw = 1, sh = 1, sw = 1;
    opfuse::Padding pad{};
    index_t dh = 1, dw = 1, groups = 1;
    index_t n = 1, h = 1, w = 1;

    conv2d_params params(const std::vector<float>& weights) const {
        conv2d_params p;
        p.in_channels = cin;
        p.out_channels = cout;
        p.kernel = {kh, kw};
        p.stride = {sh, sw};
        p.padding = pad;
        p.dilation = {dh, dw};
        p.groups = groups;
        p.weights = weights;
        return p;
    }
    index_t weight_count() const { return cout * (cin / groups) * kh * kw; }
    index_t reduction() const { return (cin / groups) * kh * kw; }
    std::array<index_t, 4> out_shape() const {
        conv2d_params p;
        p.out_channels = cout;
        p.kernel = {kh, kw};
        p.stride = {sh, sw};
        p.padding = pad;
        p.dilation = {dh, dw};
        return opfuse::conv2d_output_shape(p, n, h, w);
    }
    bool valid() const {
        const auto o = out_shape();
        return cin % groups == 0 && cout % groups == 0 && o[2] > 0 && o[3] > 0;
    }
    // Multiply-adds of the reference (for keeping the sweep's runtime in check).
    index_t macs() const {
        const auto o = out_shape();
        return o[0] * o[1] * o[2] * o[3] * reduction();
    }
    std::string str() const {
        std::ostringstream os;
        os << "N=" << n << " Cin=" << cin << " Cout=" << cout << " HxW=" << h << "x" << w << " k=" << kh << "x" << kw
           << " s=" << sh << "x" << sw << " pad{t" << pad.top << ",l" << pad.left << ",b" << pad.bottom << ",r"
           << pad.right << "} d=" << dh << "x" << dw << " g=" << groups;
        return os.str();
    }
};

// The reference conv of one case: values and the absolute sums A = sum |x * w| (N, K, OH, OW order).
struct RefConv {
    std::vector<double> val, abs;
    std::array<index_t, 4> shape{};
    double L = 1;

    double conv_tol(std::size_t i) const { return kConvSlack * u32 * std::sqrt(L) * abs[i] + kTiny; }
};

inline RefConv reference_conv(const ConvCase& cc, const std::vector<float>& weights,
                              const std::vector<float>& x_nchw) {
    RefConv r;
    const auto p = cc.params(weights);
    std::vector<float> x(x_nchw.data(), x_nchw.data() + x_nchw.size());
    r.val = opfuse::reference::conv2d(p, weights, opfuse::nchw<const float>(x.data(), cc.n, cc.cin, cc.h, cc.w));
    std::vector<float> aw(weights), ax(x_nchw);
    for (auto& v : aw) v = std::fabs(v);
    for (auto& v : ax) v = std::fabs(v);
    r.abs = opfuse::reference::conv2d(p, aw, opfuse::nchw<const float>(ax.data(), cc.n, cc.cin, cc.h, cc.w));
    r.shape = cc.out_shape();
    r.L = double(cc.reduction());
    return r;
}

// --------------------------------------------------------------------------------------- comparison

struct Val {
    double v;    // reference value
    double err;  // allowed |got - v|
};

// Largest observed |got - ref| / allowed over the run (printed when OPFUSE_TEST_REPORT is set), to show
// how much headroom the tolerances have.
inline double& worst_ratio_seen() {
    static double w = 0;
    return w;
}

// Tests that are meant to produce mismatches (checking that the comparison can fail) do not count.
struct MetaTest {
    double saved = worst_ratio_seen();
    ~MetaTest() { worst_ratio_seen() = saved; }
};

struct Comparison {
    bool ok = true;
    std::size_t bad = 0, outside = 0;
    double worst = 0;  // max |got - ref| / tol
    std::string detail;
};

// Compares out(n, c, y, x) against expected(flat NKHW index) -> Val; also checks that no buffer element
// outside the view changed.
template <class Expected>
Comparison compare(const Tensor& out, float fill, Expected&& expected) {
    Comparison r;
    const auto& v = out.view;
    std::ostringstream first;
    std::size_t i = 0;
    for (index_t n = 0; n < v.n(); ++n)
        for (index_t c = 0; c < v.c(); ++c)
            for (index_t y = 0; y < v.h(); ++y)
                for (index_t x = 0; x < v.w(); ++x, ++i) {
                    const Val e = expected(i);
                    const double got = v(n, c, y, x);
                    const double d = std::fabs(got - e.v);
                    const double ratio = d / e.err;
                    if (!(d <= e.err)) {  // also catches NaN
                        if (r.bad == 0)
                            first << "first mismatch at (n=" << n << ", c=" << c << ", h=" << y << ", w=" << x
                                  << "): got " << got << ", expected " << e.v << " +- " << e.err << "; ";
                        ++r.bad;
                        r.ok = false;
                    }
                    if (ratio > r.worst || std::isnan(ratio)) r.worst = ratio;
                }
    r.outside = out.touched_outside(fill);
    if (r.outside) r.ok = false;
    std::ostringstream os;
    os << first.str() << r.bad << " of " << i << " elements out of tolerance, worst error/tolerance " << r.worst
       << ", " << r.outside << " buffer elements outside the view modified";
    r.detail = os.str();
    if (r.worst > worst_ratio_seen() && !std::isnan(r.worst)) worst_ratio_seen() = r.worst;
    return r;
}

// ---------------------------------------------------------------------------------- epilogue specs

// Per-channel parameter data for the epilogues of a layer with C output channels.
struct EpData {
    index_t C;
    std::vector<float> bias, scale, slope, gamma, beta, mean, var;
    float bn_eps = 1e-3f;
    EpData(index_t channels, std::uint32_t seed) : C(channels) {
        std::mt19937 g(seed);
        const std::size_t c = sz(channels);
        bias = uniform(c, -2.f, 2.f, g);
        scale = uniform(c, -2.f, 2.f, g);
        slope = uniform(c, -1.5f, 1.5f, g);
        gamma = uniform(c, 0.25f, 2.f, g);
        for (std::size_t i = 0; i < c; i += 3) gamma[i] = -gamma[i];  // negative BN scales too
        beta = uniform(c, -1.f, 1.f, g);
        mean = uniform(c, -1.f, 1.f, g);
        var = uniform(c, 0.05f, 3.f, g);
    }
};

// One step of the reference chain: (value, error bound) at channel c, with the operand value of a
// tensor-reading epilogue (ignored otherwise).
using RefStep = std::function<Val(Val, index_t c, double operand)>;

inline Val step(const Val& in, double y, double lipschitz, double own) {
    return {y, lipschitz * in.err + own};
}

// A Spec names an epilogue type, its parameters and its reference step. Specs (not the epilogue types)
// parameterize the tests so that one type can be tested with several parameter sets (GELU erf/tanh).
struct BiasAddSpec {
    using type = opfuse::BiasAdd;
    static type::params params(const EpData& d) { return {d.bias}; }
    static RefStep ref(const EpData& d) {
        return [b = d.bias](Val x, index_t c, double) {
            const double bc = b[sz(c)];
            return step(x, x.v + bc, 1, u32 * (std::fabs(x.v) + std::fabs(bc)));
        };
    }
};
struct ScaleSpec {
    using type = opfuse::Scale;
    static type::params params(const EpData& d) { return {d.scale}; }
    static RefStep ref(const EpData& d) {
        return [s = d.scale](Val x, index_t c, double) {
            const double sc = s[sz(c)], y = x.v * sc;
            return step(x, y, std::fabs(sc), u32 * std::fabs(y));
        };
    }
};
struct BatchNormSpec {
    using type = opfuse::BatchNorm;
    static type::params params(const EpData& d) { return {d.gamma, d.beta, d.mean, d.var, d.bn_eps}; }
    static RefStep ref(const EpData& d) {
        return [d](Val x, index_t c, double) {
            const std::size_t i = sz(c);
            const double y = opfuse::reference::batch_norm(x.v, d.gamma[i], d.beta[i], d.mean[i], d.var[i], d.bn_eps);
            const double s = d.gamma[i] / std::sqrt(double(d.var[i]) + d.bn_eps);
            // scale and shift are rounded to float, then one fma
            const double own = 4 * u32 * (std::fabs(x.v * s) + std::fabs(d.mean[i] * s) + std::fabs(d.beta[i]));
            return step(x, y, std::fabs(s), own);
        };
    }
};
struct ReluSpec {
    using type = opfuse::Relu;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) { return step(x, opfuse::reference::relu(x.v), 1, 0); };
    }
};
struct Relu6Spec {
    using type = opfuse::Relu6;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) { return step(x, opfuse::reference::relu6(x.v), 1, 0); };
    }
};
struct ClampSpec {
    using type = opfuse::Clamp;
    static type::params params(const EpData&) { return {-1.5f, 2.25f}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) { return step(x, opfuse::reference::clamp(x.v, -1.5, 2.25), 1, 0); };
    }
};
struct LeakyReluSpec {
    using type = opfuse::LeakyRelu;
    static type::params params(const EpData&) { return {0.125f}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::leaky_relu(x.v, 0.125);
            return step(x, y, 1, u32 * std::fabs(y));
        };
    }
};
struct PReluSpec {
    using type = opfuse::PRelu;
    static type::params params(const EpData& d) { return {d.slope}; }
    static RefStep ref(const EpData& d) {
        return [s = d.slope](Val x, index_t c, double) {
            const double a = s[sz(c)];
            const double y = x.v >= 0 ? x.v : a * x.v;
            return step(x, y, std::max(1.0, std::fabs(a)), u32 * std::fabs(y));
        };
    }
};
struct SigmoidSpec {
    using type = opfuse::Sigmoid;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::sigmoid(x.v);
            return step(x, y, 0.25, kTranscSlack * u32 * std::fabs(y) + kTiny);
        };
    }
};
struct TanhSpec {
    using type = opfuse::Tanh;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = std::tanh(x.v);
            return step(x, y, 1, kTranscSlack * u32 * std::fabs(y) + kTiny);
        };
    }
};
struct SiLUSpec {
    using type = opfuse::SiLU;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::silu(x.v);
            return step(x, y, 1.1, kTranscSlack * u32 * std::fabs(y) + kTiny);
        };
    }
};
struct GeluErfSpec {
    using type = opfuse::GELU;
    static type::params params(const EpData&) { return {opfuse::GELU::Approximate::none}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::gelu_erf(x.v);
            return step(x, y, 1.13, kTranscSlack * u32 * (std::fabs(y) + std::fabs(x.v)) + kTiny);
        };
    }
};
struct GeluTanhSpec {
    using type = opfuse::GELU;
    static type::params params(const EpData&) { return {opfuse::GELU::Approximate::tanh}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::gelu_tanh(x.v);
            return step(x, y, 1.13, kTranscSlack * u32 * (std::fabs(y) + std::fabs(x.v)) + kTiny);
        };
    }
};
struct HardSigmoidSpec {  // PyTorch defaults
    using type = opfuse::HardSigmoid;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double a = double(1.f / 6.f), y = opfuse::reference::hard_sigmoid(x.v, a, 0.5);
            return step(x, y, a, kExactSlack * u32 * (std::fabs(a * x.v) + 0.5));
        };
    }
};
struct HardSigmoidOnnxSpec {  // ONNX defaults alpha = 0.2, beta = 0.5
    using type = opfuse::HardSigmoid;
    static type::params params(const EpData&) { return {0.2f, 0.5f}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double a = double(0.2f), y = opfuse::reference::hard_sigmoid(x.v, a, 0.5);
            return step(x, y, a, kExactSlack * u32 * (std::fabs(a * x.v) + 0.5));
        };
    }
};
struct HardSwishSpec {
    using type = opfuse::HardSwish;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::hard_swish(x.v);
            return step(x, y, 1.5, 2 * kExactSlack * u32 * (std::fabs(y) + std::fabs(x.v)));
        };
    }
};
struct EluSpec {
    using type = opfuse::Elu;
    static type::params params(const EpData&) { return {1.3f}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double a = double(1.3f), y = opfuse::reference::elu(x.v, a);
            return step(x, y, a, kTranscSlack * u32 * std::fabs(y) + kTiny);
        };
    }
};
struct MishSpec {
    using type = opfuse::Mish;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = opfuse::reference::mish(x.v);
            return step(x, y, 1.1, kTranscSlack * u32 * std::fabs(y) + kTiny);
        };
    }
};
struct AddSpec {
    using type = opfuse::Add;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double r) {
            return step(x, x.v + r, 1, u32 * (std::fabs(x.v) + std::fabs(r)));
        };
    }
};
struct MulSpec {
    using type = opfuse::Mul;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double m) {
            const double y = x.v * m;
            return step(x, y, std::fabs(m), u32 * std::fabs(y));
        };
    }
};

// --------------------------------------------------------------------------- running a composition

// What one composition test produces: the comparison against the reference and the output tensor.
struct ChainRun {
    Comparison cmp;
    Tensor out;
    std::size_t folded = 0;
};

// A layer (conv case + epilogue specs) with all its data: weights, input, per-channel data, operand
// tensors, and the reference output with its error bounds.
template <class... Specs>
struct Layer {
    static constexpr std::size_t operands = (std::size_t{opfuse::reads_tensor_v<typename Specs::type>} + ... + 0);

    ConvCase cc;
    std::vector<float> weights, input;
    std::vector<float> kernel_weights;  // what the kernel under test gets (a test may corrupt it)
    EpData data;
    std::array<std::vector<float>, operands> operand_data;
    std::vector<Val> expected;
    double conv_min = 0, conv_max = 0;  // range of the reference conv (what the epilogues see)
    std::size_t conv_near_zero = 0;     // reference conv values with |v| < 0.5

    // weight_scale multiplies U(-1, 1) weights; the epilogue tests use ~12/sqrt(L) so that conv outputs
    // span roughly +-50 (saturating sigmoid/tanh/elu) down to ~0.01 (see activation_data).
    // `tweak` may edit the per-channel data before the reference is computed.
    Layer(const ConvCase& c, std::uint32_t seed, double weight_scale = 1.0,
          const std::function<void(EpData&)>& tweak = nullptr)
        : cc(c), data(c.cout, seed + 1) {
        if (tweak) tweak(data);
        std::mt19937 g(seed);
        weights = uniform(sz(cc.weight_count()), -1.f, 1.f, g);
        for (auto& w : weights) w = float(w * weight_scale);
        kernel_weights = weights;
        input = activation_data(cc.n, cc.cin, cc.h, cc.w, g);
        const auto os = cc.out_shape();
        for (auto& od : operand_data) od = operand_values(sz(os[0] * os[1] * os[2] * os[3]), g);

        const RefConv ref = reference_conv(cc, weights, input);
        const std::array<RefStep, sizeof...(Specs)> steps{Specs::ref(data)...};
        const std::array<bool, sizeof...(Specs)> reads{opfuse::reads_tensor_v<typename Specs::type>...};
        expected.resize(ref.val.size());
        const index_t plane = os[2] * os[3];
        conv_min = *std::min_element(ref.val.begin(), ref.val.end());
        conv_max = *std::max_element(ref.val.begin(), ref.val.end());
        for (std::size_t i = 0; i < ref.val.size(); ++i) {
            const index_t c = (index_t(i) / plane) % os[1];
            Val v{ref.val[i], ref.conv_tol(i)};
            conv_near_zero += std::fabs(v.v) < 0.5;
            std::size_t k = 0;
            for (std::size_t s = 0; s < steps.size(); ++s)
                v = steps[s](v, c, reads[s] ? double(operand_data[k++][i]) : 0.0);
            expected[i] = v;
        }
    }

    // Runs Composition (fused<Conv, Specs::type...> or unfused<...>) with input/output/operand storages,
    // the given executor, and compares with the reference.
    template <class Composition, class Exec = opfuse::serial_executor>
    ChainRun run(Store in_store, Store out_store, Store operand_store, bool fold = true, Exec&& exec = Exec{}) const {
        return run_with<Composition>(in_store, out_store, operand_store, fold, exec, Specs::params(data)...);
    }

    // The same with explicit epilogue parameters (tests that the comparison catches wrong ones).
    template <class Composition, class Exec, class... P>
    ChainRun run_with(Store in_store, Store out_store, Store operand_store, bool fold, Exec& exec,
                      const P&... eparams) const {
        auto p = cc.params(kernel_weights);
        p.fold_batchnorm = fold;
        const Composition f(p, eparams...);
        const Tensor in = input_tensor(in_store, cc.n, cc.cin, cc.h, cc.w, input);
        const auto os = cc.out_shape();
        std::array<Tensor, operands> ops;
        for (std::size_t k = 0; k < operands; ++k)
            ops[k] = input_tensor(operand_store, os[0], os[1], os[2], os[3], operand_data[k]);
        ChainRun r;
        r.out = Tensor(out_store, os[0], os[1], os[2], os[3], kSentinel);
        call(f, in, r.out, ops, exec, std::make_index_sequence<operands>{});
        if constexpr (is_fused<Composition>::value) r.folded = f.folded();
        r.cmp = compare(r.out, kSentinel, [&](std::size_t i) { return expected[i]; });
        return r;
    }

private:
    template <class T>
    struct is_fused : std::false_type {};
    template <class M, class... E>
    struct is_fused<opfuse::fused<M, E...>> : std::true_type {};

    template <class F, class Exec, std::size_t... I>
    static void call(const F& f, const Tensor& in, const Tensor& out, const std::array<Tensor, operands>& ops,
                     Exec& exec, std::index_sequence<I...>) {
        f(in.cview(), out.view, ops[I].cview()..., exec);
    }
};

// Weight scale for the epilogue tests: conv outputs of std ~ 12 * amplitude (see Layer).
inline double activation_weight_scale(const ConvCase& cc) { return 12.0 / std::sqrt(double(cc.reduction())); }

// "NHWC -> NCHW (operands NHWC)" for INFO messages.
inline std::string layouts(Store in, Store out, Store operands) {
    return std::string(to_string(in)) + " -> " + to_string(out) + " (operands " + to_string(operands) + ")";
}

}  // namespace test
