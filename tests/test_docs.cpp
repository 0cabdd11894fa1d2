// The code snippets of docs/ops_and_epilogues.md and docs/epilogues_custom.md that are not already in an
// example, compiled and run so the docs cannot drift from the API. Each TEST_CASE names its doc section;
// the snippet is the part between "// doc:" and "// end doc".
#include <opfuse/expr/expr.hpp>

#include "support.hpp"

using namespace opfuse;

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * float(int(i % 17) - 8);
    return v;
}

}  // namespace

TEST_CASE("docs/ops_and_epilogues.md: Conv2d parameters and padding forms", "[docs]") {
    const std::vector<float> w = ramp(32 * 16 * 3 * 3, 0.01f);
    // doc: conv-params
    conv2d_params p;
    p.in_channels = 16;
    p.out_channels = 32;
    p.kernel = 3;                // or {3, 5}: kh, kw
    p.stride = 2;                // or {2, 1}
    p.padding = 1;               // all four sides
    p.padding = {1, 2};          // top/bottom 1, left/right 2
    p.padding = {0, 0, 1, 1};    // top, left, bottom, right (TensorFlow "SAME" for even inputs, stride 2)
    p.dilation = 1;
    p.groups = 1;
    p.weights = w;               // OIHW: [32][16][3][3], copied and packed at construction
    p.fold_batchnorm = true;     // fold a leading BiasAdd/BatchNorm into the weights (the default)
    const Conv2d conv(p);
    const auto shape = conv.output_shape(nhwc<const float>(nullptr, 1, 56, 56, 16));  // {1, 32, 28, 28}
    // end doc
    CHECK(shape == std::array<index_t, 4>{1, 32, 28, 28});
}

TEST_CASE("docs/ops_and_epilogues.md: grouped and depthwise convolutions", "[docs]") {
    const std::vector<float> w_dw = ramp(144 * 1 * 3 * 3, 0.1f), w_g = ramp(64 * 16 * 3 * 3, 0.01f);
    const std::vector<float> x = ramp(14 * 14 * 144, 0.05f);
    std::vector<float> y(14 * 14 * 144), yg(14 * 14 * 64), b(144, 0.5f);
    // doc: depthwise
    conv2d_params dw;
    dw.in_channels = dw.out_channels = dw.groups = 144;  // one input channel per output channel
    dw.kernel = 3;
    dw.padding = 1;
    dw.weights = w_dw;  // OIHW with I = in_channels / groups = 1: [144][1][3][3]
    fused<Conv2d, BiasAdd, Relu6> depthwise(dw, {b}, {});
    depthwise(nhwc(x.data(), 1, 14, 14, 144), nhwc(y.data(), 1, 14, 14, 144));

    conv2d_params grouped = dw;  // 4 groups of 16 -> 16 channels (ResNeXt-style)
    grouped.in_channels = grouped.out_channels = 64;
    grouped.groups = 4;
    grouped.weights = w_g;  // [64][16][3][3]
    fused<Conv2d, Relu> group_conv(grouped, {});
    group_conv(nhwc(x.data(), 1, 14, 14, 64), nhwc(yg.data(), 1, 14, 14, 64));
    // end doc
    CHECK(y[0] >= 0.f);
}

TEST_CASE("docs/ops_and_epilogues.md: views (NHWC, NCHW, channel slices)", "[docs]") {
    const std::vector<float> w = ramp(8 * 8, 0.1f);
    std::vector<float> x_nchw = ramp(1 * 8 * 5 * 5, 0.1f), concat(1 * 5 * 5 * 24, 0.f);
    // doc: views
    // NCHW input, written into channels [8, 16) of a 24-channel NHWC buffer (a concat, no copy):
    const TensorView<const float, 4> in = nchw(x_nchw.data(), 1, 8, 5, 5);  // (N, C, H, W)
    const TensorView<float, 4> slice(concat.data() + 8,                        // first element: channel 8
                                     {1, 8, 5, 5},                              // logical N, C, H, W
                                     {5 * 5 * 24, 1, 5 * 24, 24});              // strides of the 24-ch buffer
    conv2d_params p;
    p.in_channels = p.out_channels = 8;
    p.weights = w;  // 1x1
    fused<Conv2d, Relu>(p, {})(in, slice);
    // end doc
    CHECK(slice.layout() == Layout::Strided);
    CHECK(concat[0] == 0.f);   // channel 0 untouched
    CHECK(concat[16] == 0.f);  // channel 16 untouched
}

TEST_CASE("docs/ops_and_epilogues.md: tensors read by Add and Mul, executor last", "[docs]") {
    const std::vector<float> w = ramp(16 * 16, 0.02f), b(16, 0.1f), x = ramp(6 * 6 * 16, 0.1f);
    const std::vector<float> res = ramp(6 * 6 * 16, 0.2f), gate = ramp(6 * 6 * 16, 0.03f);
    std::vector<float> y(6 * 6 * 16);
    conv2d_params p;
    p.in_channels = p.out_channels = 16;
    p.weights = w;
    const auto xv = nhwc(x.data(), 1, 6, 6, 16), rv = nhwc(res.data(), 1, 6, 6, 16), gv = nhwc(gate.data(), 1, 6, 6, 16);
    const auto yv = nhwc(y.data(), 1, 6, 6, 16);
    // doc: operands
    // y = relu((conv(x) + b) * gate + residual): one tensor per Add/Mul, in chain order, after the output.
    fused<Conv2d, BiasAdd, Mul, Add, Relu> layer(p, {b}, {}, {}, {});
    layer(xv, yv, gv, rv);        // Mul reads gv, Add reads rv
    thread_pool pool(2);
    layer(xv, yv, gv, rv, pool);  // the executor, if any, comes last
    // end doc
    CHECK(y.size() == 6 * 6 * 16);
}

TEST_CASE("docs/ops_and_epilogues.md: errors", "[docs]") {
    const std::vector<float> w = ramp(16 * 16, 0.02f), x(4 * 4 * 16, 1.f);
    std::vector<float> y(4 * 4 * 8);
    conv2d_params p;
    p.in_channels = p.out_channels = 16;
    p.weights = w;
    const fused<Conv2d, Relu> layer(p, {});
    std::string message;
    // doc: errors
    try {
        layer(nhwc(x.data(), 1, 4, 4, 16), nhwc(y.data(), 1, 4, 4, 8));  // 8 output channels: wrong
    } catch (const std::invalid_argument& e) {
        message = e.what();  // "opfuse: Conv2d: output NHWC(N=1, C=8, H=4, W=4) must have shape (N=1, C=16, ...
    }
    // end doc
    CHECK_THAT(message, Catch::Contains("C=8") && Catch::Contains("C=16"));
}

namespace {

// doc: per-channel-epilogue
// y = min(x, cap[c]): one value per output channel. channels() lets fused<> check the length;
// apply() reads the values of the vector's channels, s.channel .. s.channel + S - 1.
struct ChannelCap {
    struct params {
        opfuse::span<const float> cap;
    };
    explicit ChannelCap(const params& p)
        : count_(opfuse::index_t(p.cap.size())),
          cap_(opfuse::padded_copy(p.cap.data(), p.cap.size())) {}  // zero-padded: full loads at tails

    opfuse::index_t channels() const { return count_; }

    template <class Arch>
    xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const opfuse::Site& s) const {
        return xsimd::min(x, xsimd::batch<float, Arch>::load_unaligned(cap_.data() + s.channel));
    }

private:
    opfuse::index_t count_;
    opfuse::aligned_buffer cap_;
};

// y = x * sigmoid(g), g a tensor shaped like the output: reads_tensor = true, and apply() receives
// g's vector at the same site as a third argument.
struct SigmoidGate {
    struct params {};
    static constexpr bool reads_tensor = true;
    explicit SigmoidGate(const params& = {}) {}

    template <class Arch>
    xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const opfuse::Site& s,
                                    xsimd::batch<float, Arch> g) const {
        return x * opfuse::Sigmoid{}.apply(g, s);  // reuse the library's Sigmoid
    }
};
// end doc

}  // namespace

TEST_CASE("docs/epilogues_custom.md: a per-channel and a tensor-reading epilogue", "[docs]") {
    const index_t C = 19, H = 3, W = 4;
    const std::vector<float> w = ramp(std::size_t(C * C), 0.05f), x = ramp(std::size_t(H * W * C), 0.3f);
    const std::vector<float> g = ramp(std::size_t(H * W * C), 0.4f);
    std::vector<float> cap(static_cast<std::size_t>(C)), y(x.size());
    for (index_t c = 0; c < C; ++c) cap[std::size_t(c)] = 0.1f * float(c);
    conv2d_params p;
    p.in_channels = p.out_channels = C;
    p.weights = w;
    // doc: custom-use
    fused<Conv2d, ChannelCap, SigmoidGate> layer(p, {cap}, {});
    layer(nhwc(x.data(), 1, H, W, C), nhwc(y.data(), 1, H, W, C), nhwc(g.data(), 1, H, W, C));
    // end doc
    const auto ref = reference::conv2d(p, w, nhwc<const float>(x.data(), 1, H, W, C));
    double worst = 0;
    for (index_t c = 0; c < C; ++c)
        for (index_t i = 0; i < H * W; ++i) {
            const double v = std::min(ref[std::size_t(c * H * W + i)], double(cap[std::size_t(c)]));
            const double e = v * reference::sigmoid(g[std::size_t(i * C + c)]);
            worst = std::max(worst, std::fabs(e - y[std::size_t(i * C + c)]));
        }
    CHECK(worst < 1e-5);
    std::vector<float> short_cap(3, 1.f);
    CHECK_THROWS_AS((fused<Conv2d, ChannelCap, SigmoidGate>(p, {short_cap}, {})), std::invalid_argument);
}
