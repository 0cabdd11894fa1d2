// Chains of several epilogues in different orders, fused (with and without BatchNorm folding) and
// unfused, against the reference conv followed by the scalar formulas in chain order. Tensor operands
// (Add/Mul) are passed in chain order, so swapping them would be caught.
#include "support.hpp"

using namespace test;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::unfused;

namespace {

ConvCase shape(int i) {
    ConvCase c;
    switch (i) {
        case 0:  // dense 3x3, 17 output channels: NCHW -> NCHW runs the flattened-plane kernel on AVX-512
            c.cin = 16, c.cout = 17, c.kh = c.kw = 3, c.pad = 1, c.h = 13, c.w = 11;
            break;
        case 1:  // 1x1 stride 2, 65 output channels, batch 3
            c.cin = 7, c.cout = 65, c.sh = c.sw = 2, c.n = 3, c.h = 5, c.w = 9;
            break;
        case 2:  // depthwise 5x5, 65 channels, 70 columns: NCHW -> NCHW runs the planar kernel (2 groups of
                 // 4 vectors per row)
            c.cin = c.cout = c.groups = 65, c.kh = c.kw = 5, c.pad = opfuse::Padding(2, 1, 2, 3), c.h = 20, c.w = 70;
            break;
        case 4:  // depthwise 3x3 "same", 20 channels of 9x13: NCHW -> NCHW runs the flattened-plane kernel on
                 // AVX-512 (vectors cross rows; 117 pixels end on a partial vector)
            c.cin = c.cout = c.groups = 20, c.kh = c.kw = 3, c.pad = 1, c.h = 9, c.w = 13;
            break;
        default:  // grouped with a channel multiplier: 17 in, 34 out, groups 17
            c.cin = 17, c.cout = 34, c.groups = 17, c.kh = c.kw = 3, c.pad = 1, c.h = 5, c.w = 9;
            break;
    }
    return c;
}

struct Io {
    Store in, out, operands;
};
const Io kIo[] = {{Store::NHWC, Store::NHWC, Store::NHWC},
                  {Store::NCHW, Store::NCHW, Store::NCHW},
                  {Store::NHWC, Store::NCHW, Store::NHWCSlice},
                  {Store::NHWCSlice, Store::NHWC, Store::NCHWPitch}};

// Runs fused (folding on and off) and unfused over the five shapes and the storages above. Returns
// the folded() counts seen with folding on, so a caller can check them.
template <class... Specs>
std::size_t check_chain() {
    std::size_t folded = 0;
    for (int s = 0; s < 5; ++s) {
        const ConvCase cc = shape(s);
        const Layer<Specs...> layer(cc, 60 + std::uint32_t(s), activation_weight_scale(cc));
        INFO(cc.str());
        for (const Io& io : kIo) {
            const auto f = layer.template run<fused<Conv2d, typename Specs::type...>>(io.in, io.out, io.operands, true);
            INFO("fused, folding on  " << layouts(io.in, io.out, io.operands) << ": " << f.cmp.detail);
            CHECK(f.cmp.ok);
            folded = f.folded;
            const auto g = layer.template run<fused<Conv2d, typename Specs::type...>>(io.in, io.out, io.operands, false);
            INFO("fused, folding off " << layouts(io.in, io.out, io.operands) << ": " << g.cmp.detail);
            CHECK(g.cmp.ok);
            CHECK(g.folded == 0);
            const auto u = layer.template run<unfused<Conv2d, typename Specs::type...>>(io.in, io.out, io.operands);
            INFO("unfused " << layouts(io.in, io.out, io.operands) << ": " << u.cmp.detail);
            CHECK(u.cmp.ok);
        }
    }
    return folded;
}

}  // namespace

// Each distinct fused<> type costs ~10 s of compile time (the whole conv kernel family), so the chains
// are few and chosen to cover: folding 2 / 1 / 0 leading epilogues, a foldable type after the folded
// prefix (applied, not folded), tensor operands, and per-channel epilogues after an activation. The
// operand order of several Add/Mul is covered by test_epilogues.cpp (Add, f, Add, g, Mul chains).
TEST_CASE("chain: Conv alone (unfused<Conv2d> runs no epilogue pass)", "[chain]") {
    CHECK(check_chain<>() == 0);
}
TEST_CASE("chain: Conv + BiasAdd + BatchNorm + Add + Relu", "[chain]") {
    CHECK(check_chain<BiasAddSpec, BatchNormSpec, AddSpec, ReluSpec>() == 2);
}
TEST_CASE("chain: Conv + Scale + PRelu + Mul + Sigmoid", "[chain]") {
    CHECK(check_chain<ScaleSpec, PReluSpec, MulSpec, SigmoidSpec>() == 0);
}
TEST_CASE("chain: Conv + Relu + BiasAdd (a BiasAdd after an activation is not folded)", "[chain]") {
    CHECK(check_chain<ReluSpec, BiasAddSpec>() == 0);
}
TEST_CASE("chain: Conv + BatchNorm + BiasAdd + Add + GELU (only the leading BatchNorm is folded)", "[chain]") {
    CHECK(check_chain<BatchNormSpec, BiasAddSpec, AddSpec, GeluTanhSpec>() == 1);
}
