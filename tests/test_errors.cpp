// Runtime errors: every bad argument throws std::invalid_argument naming the shapes, and a call that
// throws has not written a single byte of its output (the output buffer is filled with a sentinel and
// compared bitwise afterwards).
#include "support.hpp"

using namespace test;
using Catch::Contains;
using opfuse::Add;
using opfuse::BatchNorm;
using opfuse::BiasAdd;
using opfuse::Clamp;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::Mul;
using opfuse::PRelu;
using opfuse::Relu;
using opfuse::Scale;
using opfuse::unfused;

namespace {

// The layer of these tests: 4 -> 64 channels, 3x3, padding 1, on 1x4x6x7 inputs (output 1x64x6x7).
conv2d_params layer(const std::vector<float>& w) {
    conv2d_params p;
    p.in_channels = 4;
    p.out_channels = 64;
    p.kernel = 3;
    p.padding = 1;
    p.weights = w;
    return p;
}
const std::vector<float> kWeights(64 * 4 * 9, 0.5f);
const std::vector<float> kInput(1 * 4 * 6 * 7, 1.f);

Tensor output(index_t n = 1, index_t c = 64, index_t h = 6, index_t w = 7, Store s = Store::NHWC) {
    return Tensor(s, n, c, h, w, kSentinel);
}
Tensor input(index_t n = 1, index_t c = 4, index_t h = 6, index_t w = 7, Store s = Store::NHWC) {
    return Tensor(s, n, c, h, w, 1.f);
}
BatchNorm::params bn(const std::vector<float>& g, const std::vector<float>& b, const std::vector<float>& m,
                     const std::vector<float>& v) {
    return {g, b, m, v, 1e-5f};
}
const std::vector<float> k64(64, 1.f), k63(63, 1.f);

}  // namespace

// REQUIRE_THROWS_WITH matches the exception's what(); the type is checked separately.
#define REQUIRE_INVALID(expr, fragment)                                     \
    do {                                                                    \
        REQUIRE_THROWS_AS(expr, std::invalid_argument);                     \
        REQUIRE_THROWS_WITH(expr, Contains(fragment));                      \
    } while (0)

// The compositions called in this file (one fused and one unfused type: each type instantiates the
// whole conv kernel family). Constructor-only checks below may use other types freely.
using F = fused<Conv2d, Add, Relu, Mul>;
using U = unfused<Conv2d, Add, Relu, Mul>;

TEST_CASE("errors: tensors that do not fit the layer are rejected before any output is written", "[errors]") {
    const F f(layer(kWeights), {}, {}, {});
    const U u(layer(kWeights), {}, {}, {});
    opfuse::thread_pool pool(2);
    // Runs both compositions (serial and on a pool) on (in, out) with operands shaped like `out`, expects
    // the error, and checks that the output buffer still holds the sentinel everywhere.
    auto expect = [&](const Tensor& in, Tensor& out, const std::string& fragment, const std::string& fragment2 = "") {
        INFO("in " << opfuse::describe(in.view) << ", out " << opfuse::describe(out.view));
        const Tensor r(Store::NHWC, out.view.n(), out.view.c(), out.view.h(), out.view.w(), 1.f);
        const auto o = r.cview();
        REQUIRE_INVALID(f(in.cview(), out.view, o, o), fragment);
        REQUIRE_INVALID(f(in.cview(), out.view, o, o, pool), fragment);
        REQUIRE_INVALID(u(in.cview(), out.view, o, o), fragment);
        REQUIRE_INVALID(u(in.cview(), out.view, o, o, pool), fragment);
        if (!fragment2.empty()) REQUIRE_THROWS_WITH(f(in.cview(), out.view, o, o), Contains(fragment2));
        CHECK(out.touched_anywhere(kSentinel) == 0);
    };
    SECTION("channel mismatch") {
        Tensor out = output();
        expect(input(1, 5), out, "C=5", "in_channels=4");
        expect(input(1, 3, 6, 7, Store::NCHW), out, "C=3");
    }
    SECTION("output of the wrong size, each dimension") {
        for (auto dims : {std::array<index_t, 4>{2, 64, 6, 7}, {1, 63, 6, 7}, {1, 64, 5, 7}, {1, 64, 6, 8}}) {
            Tensor out = output(dims[0], dims[1], dims[2], dims[3]);
            const std::string got = "(N=" + std::to_string(dims[0]) + ", C=" + std::to_string(dims[1]) +
                                    ", H=" + std::to_string(dims[2]) + ", W=" + std::to_string(dims[3]) + ")";
            expect(input(), out, got, "(N=1, C=64, H=6, W=7)");
        }
        Tensor nchw = output(1, 65, 6, 7, Store::NCHW);
        expect(input(), nchw, "NCHW(N=1, C=65, H=6, W=7)");
    }
    SECTION("kernel larger than the padded input") {
        const F g([] {
            conv2d_params p = layer(kWeights);
            p.padding = 0;
            return p;
        }(), {}, {}, {});
        Tensor out = output(1, 64, 1, 1);
        const Tensor r = output(1, 64, 1, 1);
        const Tensor in = input(1, 4, 2, 6);
        REQUIRE_INVALID(g(in.cview(), out.view, r.cview(), r.cview()), "larger than the padded input");
        REQUIRE_THROWS_WITH(g(in.cview(), out.view, r.cview(), r.cview()), Contains("H=2"));
        CHECK(out.touched_anywhere(kSentinel) == 0);
        // dilation makes a 3x3 kernel span 5 pixels: 4 + 2*0 < 5
        const F d([] {
            conv2d_params p = layer(kWeights);
            p.padding = 0;
            p.dilation = 2;
            return p;
        }(), {}, {}, {});
        const Tensor in4 = input(1, 4, 4, 4);
        REQUIRE_INVALID(d(in4.cview(), out.view, r.cview(), r.cview()), "dilation 2x2");
        CHECK(out.touched_anywhere(kSentinel) == 0);
    }
    SECTION("zero and negative tensor sizes") {
        Tensor out = output();
        expect(input(0, 4, 6, 7), out, "input sizes must be positive");
        expect(input(1, 4, 0, 7), out, "H=0");
        expect(input(1, 4, 6, 0), out, "W=0");
        const Tensor in = input(), r = output();
        const opfuse::TensorView<const float, 4> negative(in.view.data(), {1, 4, -6, 7}, {168, 1, 28, 4});
        REQUIRE_INVALID(f(negative, out.view, r.cview(), r.cview()), "H=-6");
        Tensor empty_out = output(1, 0, 6, 7);
        expect(input(), empty_out, "C=0");
        CHECK(out.touched_anywhere(kSentinel) == 0);
    }
    SECTION("null input and output data") {
        Tensor out = output();
        const Tensor in = input(), r = output();
        const auto o = r.cview();
        REQUIRE_INVALID(f(opfuse::nhwc<const float>(nullptr, 1, 6, 7, 4), out.view, o, o), "input data is null");
        REQUIRE_INVALID(u(opfuse::nhwc<const float>(nullptr, 1, 6, 7, 4), out.view, o, o), "input data is null");
        REQUIRE_INVALID(f(in.cview(), opfuse::nhwc<float>(nullptr, 1, 6, 7, 64), o, o), "output data is null");
        REQUIRE_INVALID(u(in.cview(), opfuse::nhwc<float>(nullptr, 1, 6, 7, 64), o, o, pool), "output data is null");
        CHECK(out.touched_anywhere(kSentinel) == 0);
    }
}

TEST_CASE("errors: tensor operands of Add/Mul", "[errors]") {
    const F f(layer(kWeights), {}, {}, {});
    const U u(layer(kWeights), {}, {}, {});
    const Tensor in = input();
    Tensor out = output();
    const Tensor good = output(), good_nchw = output(1, 64, 6, 7, Store::NCHW);
    CHECK_NOTHROW(f(in.cview(), out.view, good.cview(), good_nchw.cview()));  // any layout, same shape
    out = output();
    for (auto dims : {std::array<index_t, 4>{2, 64, 6, 7}, {1, 63, 6, 7}, {1, 64, 7, 7}, {1, 64, 6, 6}}) {
        const Tensor bad = output(dims[0], dims[1], dims[2], dims[3]);
        INFO(opfuse::describe(bad.view));
        REQUIRE_INVALID(f(in.cview(), out.view, bad.cview(), good.cview()), "tensor operand #0");
        REQUIRE_INVALID(f(in.cview(), out.view, good.cview(), bad.cview()), "tensor operand #1");
        REQUIRE_THROWS_WITH(f(in.cview(), out.view, good.cview(), bad.cview()),
                            Contains(opfuse::describe(bad.view)) && Contains("NHWC(N=1, C=64, H=6, W=7)"));
        REQUIRE_INVALID(u(in.cview(), out.view, bad.cview(), good.cview()), "tensor operand #0");
        REQUIRE_INVALID(u(in.cview(), out.view, good.cview(), bad.cview()), "tensor operand #1");
    }
    const auto null = opfuse::nhwc<const float>(nullptr, 1, 6, 7, 64);
    REQUIRE_INVALID(f(in.cview(), out.view, null, good.cview()), "tensor operand #0 (Add/Mul) is null");
    REQUIRE_INVALID(u(in.cview(), out.view, good.cview(), null), "tensor operand #1 (Add/Mul) is null");
    CHECK(out.touched_anywhere(kSentinel) == 0);
}

TEST_CASE("errors: Conv2d hyper-parameters", "[errors]") {
    auto with = [](auto edit) {
        conv2d_params p = layer(kWeights);
        edit(p);
        return p;
    };
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.in_channels = 0; })), "in_channels=0");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.out_channels = -64; })), "out_channels=-64");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.kernel = {0, 3}; })), "kernel must be positive, got 0x3");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.kernel = {3, -1}; })), "3x-1");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.stride = {1, 0}; })), "stride must be positive");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.dilation = {-1, 1}; })), "dilation must be positive");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.padding = {0, 0, -1, 0}; })), "padding must be >= 0");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.groups = 0; })), "groups=0");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.groups = 3; })), "groups=3 must divide in_channels=4");
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) {
                        p.in_channels = 6, p.groups = 3;  // divides in (6) but not out (64)
                    })),
                    "out_channels=64");
    // weights: wrong length (one short, one extra, as if groups were ignored) and null
    const std::vector<float> short_w(64 * 4 * 9 - 1), grouped_w(64 * 2 * 9);
    REQUIRE_INVALID(Conv2d(with([&](conv2d_params& p) { p.weights = short_w; })), "got 2303");
    REQUIRE_INVALID(Conv2d(with([&](conv2d_params& p) { p.weights = short_w; })), "= 2304");
    REQUIRE_INVALID(Conv2d(with([&](conv2d_params& p) { p.groups = 4; })), "got 2304");
    CHECK_NOTHROW(Conv2d(with([&](conv2d_params& p) { p.groups = 2, p.weights = grouped_w; })));  // right for groups=2
    REQUIRE_INVALID(Conv2d(with([](conv2d_params& p) { p.weights = {}; })), "weights are null");
    // the same checks through fused<> and unfused<>
    REQUIRE_INVALID((F(with([](conv2d_params& p) { p.groups = 3; }), {}, {}, {})), "groups=3");
    REQUIRE_INVALID((U(with([&](conv2d_params& p) { p.weights = short_w; }), {}, {}, {})), "got 2303");
}

TEST_CASE("errors: per-channel epilogues of the wrong length", "[errors]") {
    const auto p = layer(kWeights);
    auto unfolded = p;
    unfolded.fold_batchnorm = false;
    const BatchNorm::params bn64 = bn(k64, k64, k64, k64), bn63 = bn(k63, k63, k63, k63);
    SECTION("BiasAdd with 63 values for 64 channels") {
        REQUIRE_INVALID((fused<Conv2d, BiasAdd>(p, {k63})), "63 per-channel values");               // folded
        REQUIRE_INVALID((fused<Conv2d, BiasAdd>(p, {k63})), "64 output channels");
        REQUIRE_INVALID((fused<Conv2d, BiasAdd>(unfolded, {k63})), "63 per-channel values");        // not folded
        REQUIRE_INVALID((fused<Conv2d, Relu, BiasAdd>(p, {}, {k63})), "63 per-channel values");     // after Relu
        REQUIRE_INVALID((fused<Conv2d, BatchNorm, BiasAdd>(p, bn64, {k63})), "63 per-channel values");
        REQUIRE_INVALID((unfused<Conv2d, BiasAdd>(p, {k63})), "63 per-channel values");
        REQUIRE_INVALID((fused<Conv2d, BiasAdd>(p, {std::vector<float>{}})), "null or empty");
    }
    SECTION("BatchNorm, Scale and PRelu with 63 values") {
        REQUIRE_INVALID((fused<Conv2d, BatchNorm>(p, bn63)), "63 per-channel values");
        REQUIRE_INVALID((fused<Conv2d, BiasAdd, BatchNorm>(p, {k64}, bn63)), "63 per-channel values");
        REQUIRE_INVALID((fused<Conv2d, BatchNorm>(unfolded, bn63)), "63 per-channel values");
        REQUIRE_INVALID((unfused<Conv2d, BatchNorm>(p, bn63)), "63 per-channel values");
        REQUIRE_INVALID((fused<Conv2d, Scale>(p, {k63})), "63 per-channel values");
        REQUIRE_INVALID((fused<Conv2d, Relu, PRelu>(p, {}, {k63})), "63 per-channel values");
        REQUIRE_INVALID((unfused<Conv2d, PRelu>(p, {k63})), "63 per-channel values");
    }
    SECTION("BatchNorm with mismatched lengths") {
        REQUIRE_INVALID(BatchNorm(bn(k64, k64, k64, k63)), "got 64, 64, 64, 63");
        REQUIRE_INVALID(BatchNorm(bn(k64, k63, k64, k64)), "got 64, 63, 64, 64");
        REQUIRE_INVALID(BatchNorm(bn(k64, k64, k63, k64)), "got 64, 64, 63, 64");
        REQUIRE_INVALID(BatchNorm(bn(k63, k64, k64, k64)), "got 63, 64, 64, 64");
        REQUIRE_INVALID(BatchNorm(bn({}, {}, {}, {})), "same non-zero length");
        REQUIRE_INVALID((fused<Conv2d, BatchNorm, Relu>(p, bn(k64, k64, k63, k64), {})), "got 64, 64, 63, 64");
        REQUIRE_INVALID(BatchNorm(BatchNorm::params{k64, k64, k64, k64, -1.f}), "eps");
    }
    SECTION("Clamp with min > max") {
        REQUIRE_INVALID(Clamp(Clamp::params{2.f, 1.f}), "Clamp: min (2) must not exceed max (1)");
        REQUIRE_INVALID((fused<Conv2d, Clamp>(p, Clamp::params{0.5f, -0.5f})), "Clamp");
        CHECK_NOTHROW(Clamp(Clamp::params{1.f, 1.f}));
    }
    SECTION("thread_pool with no thread") { REQUIRE_INVALID(opfuse::thread_pool(0), "at least one thread"); }
}
