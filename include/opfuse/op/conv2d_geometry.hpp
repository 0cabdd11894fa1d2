// Conv2d hyper-parameters, their validation, and the geometry of one call (input and output sizes).
#pragma once

#include <cstdint>

#include "../core/error.hpp"
#include "../core/span.hpp"
#include "../core/tensor.hpp"

namespace opfuse {

struct Size2 {
    index_t h = 1, w = 1;
    constexpr Size2() = default;
    constexpr Size2(index_t both) : h(both), w(both) {}  // NOLINT: Size2 s = 3;
    constexpr Size2(index_t h_, index_t w_) : h(h_), w(w_) {}
};

// {p} pads every side, {ph, pw} pads top/bottom by ph and left/right by pw, {top, left, bottom, right}
// pads each side on its own (ONNX "pads" order is top, left, bottom, right too).
struct Padding {
    index_t top = 0, left = 0, bottom = 0, right = 0;
    constexpr Padding() = default;
    constexpr Padding(index_t all) : top(all), left(all), bottom(all), right(all) {}  // NOLINT
    constexpr Padding(index_t h, index_t w) : top(h), left(w), bottom(h), right(w) {}
    constexpr Padding(index_t t, index_t l, index_t b, index_t r) : top(t), left(l), bottom(b), right(r) {}
};

struct conv2d_params {
    index_t in_channels = 0;
    index_t out_channels = 0;
    Size2 kernel{1, 1};
    Size2 stride{1, 1};
    Padding padding{};
    Size2 dilation{1, 1};
    index_t groups = 1;
    span<const float> weights;   // PyTorch/ONNX OIHW: [out_channels][in_channels / groups][kh][kw]
    bool fold_batchnorm = true;  // fold a leading BiasAdd/BatchNorm epilogue into weights and bias
};

namespace detail {

inline void validate(const conv2d_params& p) {
    require(p.in_channels > 0 && p.out_channels > 0, "Conv2d: channels must be positive, got in_channels=",
            p.in_channels, " out_channels=", p.out_channels);
    require(p.groups > 0 && p.in_channels % p.groups == 0 && p.out_channels % p.groups == 0,
            "Conv2d: groups=", p.groups, " must divide in_channels=", p.in_channels, " and out_channels=",
            p.out_channels);
    require(p.kernel.h > 0 && p.kernel.w > 0, "Conv2d: kernel must be positive, got ", p.kernel.h, "x", p.kernel.w);
    require(p.stride.h > 0 && p.stride.w > 0, "Conv2d: stride must be positive, got ", p.stride.h, "x", p.stride.w);
    require(p.dilation.h > 0 && p.dilation.w > 0, "Conv2d: dilation must be positive, got ", p.dilation.h, "x",
            p.dilation.w);
    const Padding& q = p.padding;
    require(q.top >= 0 && q.left >= 0 && q.bottom >= 0 && q.right >= 0, "Conv2d: padding must be >= 0, got {",
            q.top, ", ", q.left, ", ", q.bottom, ", ", q.right, "}");
    const index_t expected = p.out_channels * (p.in_channels / p.groups) * p.kernel.h * p.kernel.w;
    require(p.weights.data() != nullptr, "Conv2d: weights are null");
    require(static_cast<index_t>(p.weights.size()) == expected, "Conv2d: weights must hold O*I/groups*KH*KW = ",
            p.out_channels, "*", p.in_channels / p.groups, "*", p.kernel.h, "*", p.kernel.w, " = ", expected,
            " values (OIHW), got ", p.weights.size());
}

// Output size along one axis; <= 0 when the dilated kernel is larger than the padded input.
constexpr index_t conv_out_size(index_t in, index_t pad_lo, index_t pad_hi, index_t k, index_t dil, index_t s) {
    const index_t span_ = dil * (k - 1) + 1;
    const index_t padded = in + pad_lo + pad_hi;
    return padded < span_ ? 0 : (padded - span_) / s + 1;
}

}  // namespace detail

// Output shape (N, C, H, W) of a Conv2d with params `p` on an input of logical shape (n, c, h, w).
inline std::array<index_t, 4> conv2d_output_shape(const conv2d_params& p, index_t n, index_t h, index_t w) {
    return {n, p.out_channels,
            detail::conv_out_size(h, p.padding.top, p.padding.bottom, p.kernel.h, p.dilation.h, p.stride.h),
            detail::conv_out_size(w, p.padding.left, p.padding.right, p.kernel.w, p.dilation.w, p.stride.w)};
}

namespace detail {

// Checks one call's tensors against the layer; throws before anything is written.
inline void validate_call(const conv2d_params& p, const TensorView<const float, 4>& in,
                          const TensorView<float, 4>& out) {
    require(in.data() != nullptr, "Conv2d: input data is null");
    require(out.data() != nullptr, "Conv2d: output data is null");
    if (!(in.n() > 0 && in.h() > 0 && in.w() > 0)) fail("Conv2d: input sizes must be positive, got ", describe(in));
    if (!(in.c() == p.in_channels)) fail("Conv2d: input ", describe(in), " has C=", in.c(), " but the layer has in_channels=",
            p.in_channels);
    const auto os = conv2d_output_shape(p, in.n(), in.h(), in.w());
    if (!(os[2] > 0 && os[3] > 0)) fail("Conv2d: kernel ", p.kernel.h, "x", p.kernel.w, " (dilation ", p.dilation.h, "x",
            p.dilation.w, ") is larger than the padded input ", describe(in));
    if (!(out.shape() == os)) fail("Conv2d: output ", describe(out), " must have shape (N=", os[0], ", C=", os[1],
            ", H=", os[2], ", W=", os[3], ") for input ", describe(in));
}

}  // namespace detail
}  // namespace opfuse
