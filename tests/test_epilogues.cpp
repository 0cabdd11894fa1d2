// Every epilogue, fused and unfused, against the reference conv followed by the epilogue's scalar
// formula, on shapes with channel tails (17 and 65 output channels) in the dense and depthwise kernels.
//
// Compile time: each distinct fused<Conv2d, ...> type instantiates the whole conv kernel family
// (~10 s of -O3 per type), so the 18 built-in epilogue types are tested in four chains in which every
// epilogue gets a full-range input: the first one the conv output (about [-50, 50], with values near
// 0), each later one the previous result plus an Add operand whose elements reach +-40 (see
// operand_values). Parameter variants of one type (GELU erf/tanh, HardSigmoid PyTorch/ONNX) reuse the
// same fused type.
#include "support.hpp"

using namespace test;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::unfused;

namespace {

ConvCase shape(int i) {
    ConvCase c;
    switch (i) {
        case 0:  // dense 3x3, 17 output channels (one full vector + tail, or a tail only)
            c.cin = 7, c.cout = 17, c.kh = c.kw = 3, c.pad = 1, c.h = 5, c.w = 9;
            break;
        case 1:  // 1x1, 65 output channels, batch 2
            c.cin = 16, c.cout = 65, c.n = 2, c.h = 13, c.w = 11;
            break;
        case 2:  // depthwise 3x3 stride 1, 17 channels, 37 columns: NCHW -> NCHW runs the planar kernel,
                 // whose epilogue Sites run along the row (per-channel values broadcast, operands loaded
                 // along W)
            c.cin = c.cout = c.groups = 17, c.kh = c.kw = 3, c.pad = 1, c.h = 6, c.w = 37;
            break;
        default:  // depthwise 3x3 stride 2, 17 channels
            c.cin = c.cout = c.groups = 17, c.kh = c.kw = 3, c.sh = c.sw = 2, c.pad = 1, c.h = 13, c.w = 11;
            break;
    }
    return c;
}

struct Io {
    Store in, out, operands;
};
const Io kIo[] = {{Store::NHWC, Store::NHWC, Store::NCHW},
                  {Store::NCHW, Store::NCHW, Store::NHWC},
                  {Store::NHWC, Store::NCHW, Store::NCHW},
                  {Store::NHWCSlice, Store::NHWCSlice, Store::NCHWPitch}};

template <class... Specs>
void check_epilogues() {
    for (int s = 0; s < 4; ++s) {
        const ConvCase cc = shape(s);
        const Layer<Specs...> layer(cc, 40 + std::uint32_t(s), activation_weight_scale(cc));
        // the input of the first epilogue spans saturation on both sides and the region near zero
        INFO(cc.str() << ": conv range [" << layer.conv_min << ", " << layer.conv_max << "], "
                      << layer.conv_near_zero << " values with |x| < 0.5");
        REQUIRE(layer.conv_min < -20);
        REQUIRE(layer.conv_max > 20);
        REQUIRE(layer.conv_near_zero >= 10);
        for (const Io& io : kIo) {
            const ChainRun f = layer.template run<fused<Conv2d, typename Specs::type...>>(io.in, io.out, io.operands);
            INFO("fused   " << layouts(io.in, io.out, io.operands) << ": " << f.cmp.detail);
            CHECK(f.cmp.ok);
            const ChainRun u = layer.template run<unfused<Conv2d, typename Specs::type...>>(io.in, io.out, io.operands);
            INFO("unfused " << layouts(io.in, io.out, io.operands) << ": " << u.cmp.detail);
            CHECK(u.cmp.ok);
        }
    }
}

}  // namespace

TEST_CASE("epilogues: BiasAdd, Sigmoid, Tanh, SiLU", "[epilogue]") {
    check_epilogues<BiasAddSpec, SigmoidSpec, AddSpec, TanhSpec, AddSpec, SiLUSpec>();
}
TEST_CASE("epilogues: Scale, GELU (erf and tanh forms), Mish, Elu", "[epilogue]") {
    check_epilogues<ScaleSpec, GeluErfSpec, AddSpec, MishSpec, AddSpec, EluSpec>();
    check_epilogues<ScaleSpec, GeluTanhSpec, AddSpec, MishSpec, AddSpec, EluSpec>();
}
TEST_CASE("epilogues: BatchNorm, HardSwish, HardSigmoid (PyTorch and ONNX), LeakyRelu", "[epilogue]") {
    check_epilogues<BatchNormSpec, HardSwishSpec, AddSpec, HardSigmoidSpec, AddSpec, LeakyReluSpec>();
    check_epilogues<BatchNormSpec, HardSwishSpec, AddSpec, HardSigmoidOnnxSpec, AddSpec, LeakyReluSpec>();
}
TEST_CASE("epilogues: PRelu, Clamp, Relu6, Mul, Relu", "[epilogue]") {
    check_epilogues<PReluSpec, AddSpec, ClampSpec, AddSpec, Relu6Spec, MulSpec, ReluSpec>();
}

// The comparisons above must be able to fail: a wrong parameter or formula that is close to the right
// one is caught. (If one of these starts passing, the tolerances have become too loose.)
TEST_CASE("the epilogue comparison detects small deviations", "[epilogue][meta]") {
    const MetaTest meta;
    const ConvCase cc = shape(0);
    opfuse::serial_executor serial;
    using G2 = fused<Conv2d, opfuse::Scale, opfuse::GELU, opfuse::Add, opfuse::Mish, opfuse::Add, opfuse::Elu>;
    using Specs2 = Layer<ScaleSpec, GeluErfSpec, AddSpec, MishSpec, AddSpec, EluSpec>;
    const Specs2 layer(cc, 40, activation_weight_scale(cc));
    const auto& d = layer.data;
    SECTION("GELU tanh approximation checked against the erf reference") {
        const auto r = layer.run_with<G2>(Store::NHWC, Store::NHWC, Store::NHWC, true, serial, opfuse::Scale::params{d.scale},
                                          opfuse::GELU::params{opfuse::GELU::Approximate::tanh}, opfuse::Add::params{},
                                          opfuse::Mish::params{}, opfuse::Add::params{}, opfuse::Elu::params{1.3f});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
    SECTION("Elu alpha 1.3 vs 1.3001") {
        const auto r = layer.run_with<G2>(Store::NCHW, Store::NCHW, Store::NHWC, true, serial, opfuse::Scale::params{d.scale},
                                          opfuse::GELU::params{}, opfuse::Add::params{}, opfuse::Mish::params{},
                                          opfuse::Add::params{}, opfuse::Elu::params{1.3001f});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
    SECTION("one scale value (of the tail channel) off by 1e-4 relative") {
        auto scale = d.scale;
        scale[16] *= 1.f + 1e-4f;
        const auto r = layer.run_with<G2>(Store::NHWC, Store::NCHW, Store::NHWC, true, serial, opfuse::Scale::params{scale},
                                          opfuse::GELU::params{}, opfuse::Add::params{}, opfuse::Mish::params{},
                                          opfuse::Add::params{}, opfuse::Elu::params{1.3f});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
    SECTION("BatchNorm eps 1e-3 vs 1.1e-3 (unfused)") {
        using Specs3 = Layer<BatchNormSpec, HardSwishSpec, AddSpec, HardSigmoidSpec, AddSpec, LeakyReluSpec>;
        const Specs3 l3(cc, 40, activation_weight_scale(cc));
        auto bn = BatchNormSpec::params(l3.data);
        bn.eps = 1.1e-3f;
        const auto r = l3.run_with<unfused<Conv2d, opfuse::BatchNorm, opfuse::HardSwish, opfuse::Add, opfuse::HardSigmoid,
                                           opfuse::Add, opfuse::LeakyRelu>>(
            Store::NHWC, Store::NHWC, Store::NHWC, true, serial, bn, opfuse::HardSwish::params{}, opfuse::Add::params{},
            opfuse::HardSigmoid::params{}, opfuse::Add::params{}, opfuse::LeakyRelu::params{0.125f});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
}
