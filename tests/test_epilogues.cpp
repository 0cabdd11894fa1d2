// Every epilogue on its own, fused<Conv2d, E> and unfused<Conv2d, E>, against the reference conv
// followed by the epilogue's scalar formula. The shapes have channel tails (17 and 65 output channels)
// and cover the dense and depthwise kernels; the conv outputs span about [-50, 50] including values
// near 0, so the activations are seen in their linear parts and deep in saturation.
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

template <class Spec>
void check_epilogue() {
    using E = typename Spec::type;
    for (int s = 0; s < 3; ++s) {
        const ConvCase cc = shape(s);
        const Layer<Spec> layer(cc, 40 + std::uint32_t(s), activation_weight_scale(cc));
        // the inputs of the epilogue really span saturation on both sides and the region near zero
        INFO(cc.str() << ": conv range [" << layer.conv_min << ", " << layer.conv_max << "], "
                      << layer.conv_near_zero << " values with |x| < 0.5");
        REQUIRE(layer.conv_min < -20);
        REQUIRE(layer.conv_max > 20);
        REQUIRE(layer.conv_near_zero >= 10);
        for (const Io& io : kIo) {
            const ChainRun f = layer.template run<fused<Conv2d, E>>(io.in, io.out, io.operands);
            INFO("fused   " << layouts(io.in, io.out, io.operands) << ": " << f.cmp.detail);
            CHECK(f.cmp.ok);
            const ChainRun u = layer.template run<unfused<Conv2d, E>>(io.in, io.out, io.operands);
            INFO("unfused " << layouts(io.in, io.out, io.operands) << ": " << u.cmp.detail);
            CHECK(u.cmp.ok);
        }
    }
}

}  // namespace

TEMPLATE_TEST_CASE("each epilogue, fused and unfused, matches the reference", "[epilogue]", BiasAddSpec, ScaleSpec,
                   BatchNormSpec, ReluSpec, Relu6Spec, ClampSpec, LeakyReluSpec, PReluSpec, SigmoidSpec, TanhSpec,
                   SiLUSpec, GeluErfSpec, GeluTanhSpec, HardSigmoidSpec, HardSigmoidOnnxSpec, HardSwishSpec, EluSpec,
                   MishSpec, AddSpec, MulSpec) {
    check_epilogue<TestType>();
}

// The comparisons above must be able to fail: a wrong parameter or formula that is close to the right
// one is caught. (If one of these starts passing, the tolerances have become too loose.)
TEST_CASE("the epilogue comparison detects small deviations", "[epilogue][meta]") {
    const MetaTest meta;
    const ConvCase cc = shape(0);
    opfuse::serial_executor serial;
    SECTION("GELU tanh approximation checked against the erf reference") {
        const Layer<GeluErfSpec> layer(cc, 40, activation_weight_scale(cc));
        const auto r = layer.run_with<fused<Conv2d, opfuse::GELU>>(Store::NHWC, Store::NHWC, Store::NHWC, true, serial,
                                                                    opfuse::GELU::params{opfuse::GELU::Approximate::tanh});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
    SECTION("BatchNorm eps 1e-3 vs 1.1e-3") {
        const Layer<BatchNormSpec> layer(cc, 40, activation_weight_scale(cc));
        auto p = BatchNormSpec::params(layer.data);
        p.eps = 1.1e-3f;
        const auto r = layer.run_with<unfused<Conv2d, opfuse::BatchNorm>>(Store::NHWC, Store::NCHW, Store::NHWC, true,
                                                                           serial, p);
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
    SECTION("Elu alpha 1.3 vs 1.3001") {
        const Layer<EluSpec> layer(cc, 40, activation_weight_scale(cc));
        const auto r = layer.run_with<fused<Conv2d, opfuse::Elu>>(Store::NCHW, Store::NCHW, Store::NHWC, true, serial,
                                                                   opfuse::Elu::params{1.3001f});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
    SECTION("one bias value off by 1e-4") {
        Layer<BiasAddSpec> layer(cc, 40, activation_weight_scale(cc));
        auto bias = layer.data.bias;
        bias[16] += 1e-4f;  // the tail channel
        const auto r = layer.run_with<fused<Conv2d, opfuse::BiasAdd>>(Store::NHWC, Store::NHWC, Store::NHWC, true,
                                                                       serial, opfuse::BiasAdd::params{bias});
        INFO(r.cmp.detail);
        CHECK_FALSE(r.cmp.ok);
    }
}
