// Every SIMD instruction set the compiler flags enable (not only the default, widest one) runs the conv
// kernels and the transcendental epilogues correctly: a -march=native build on an AVX-512 machine also
// tests the SSE2, AVX2 and AVX2+FMA paths, each with its own vector width (4, 8, 16
// lanes) and so its own channel tails and register tiles.
#include <tuple>

#include "support.hpp"

using namespace test;
using opfuse::basic_conv2d;
using opfuse::fused;
using opfuse::unfused;

// sse2 (4 lanes, FMA emulated), avx2 without and with FMA (8 lanes), avx512f (16 lanes). Each arch costs
// two instantiations of the conv kernel family (~10 s of compile time each), so SSE4.x/AVX1 are left
// out: they differ from sse2/avx2 only in a few xsimd primitives.
using TestedArchs = decltype(std::tuple_cat(
#if XSIMD_WITH_SSE2
    std::tuple<xsimd::sse2>{},
#endif
#if XSIMD_WITH_AVX2
    std::tuple<xsimd::avx2>{},
#endif
#if XSIMD_WITH_FMA3_AVX2
    std::tuple<xsimd::fma3<xsimd::avx2>>{},
#endif
#if XSIMD_WITH_AVX512F
    std::tuple<xsimd::avx512f>{},
#endif
    std::tuple<>{}));

namespace {

std::vector<std::pair<ConvCase, std::pair<Store, Store>>> isa_cases() {
    std::vector<std::pair<ConvCase, std::pair<Store, Store>>> v;
    ConvCase c;
    c.cin = 17, c.cout = 65, c.kh = c.kw = 3, c.pad = 1, c.n = 2, c.h = 13, c.w = 11;
    v.push_back({c, {Store::NHWC, Store::NHWC}});
    v.push_back({c, {Store::NCHW, Store::NCHW}});
    v.push_back({c, {Store::NHWCSlice, Store::NCHW}});
    c = {};
    c.cin = 64, c.cout = 17, c.sh = c.sw = 2, c.h = 20, c.w = 7;
    v.push_back({c, {Store::NHWC, Store::NHWC}});
    v.push_back({c, {Store::NCHWPitch, Store::NHWCSlice}});
    c = {};
    c.cin = 16, c.cout = 7, c.kh = c.kw = 7, c.pad = opfuse::Padding(3, 2, 1, 4), c.dh = c.dw = 2, c.h = 13, c.w = 11;
    v.push_back({c, {Store::NHWC, Store::NCHW}});
    c = {};
    c.cin = c.cout = c.groups = 65, c.kh = c.kw = 5, c.sh = 2, c.pad = 2, c.n = 3, c.h = 20, c.w = 7;
    v.push_back({c, {Store::NHWC, Store::NHWC}});
    v.push_back({c, {Store::NCHW, Store::NCHW}});
    v.push_back({c, {Store::NHWCSlice, Store::NHWCSlice}});
    c = {};
    c.cin = 3, c.cout = 6, c.groups = 3, c.kh = c.kw = 3, c.pad = 1, c.h = 5, c.w = 9;
    v.push_back({c, {Store::NHWC, Store::NHWC}});
    // NCHW rows and channel counts with whole 16 x 16 squares and tails for the transposing band copies
    // (dense, first layer, depthwise)
    c = {};
    c.cin = 35, c.cout = 33, c.kh = c.kw = 3, c.pad = 1, c.h = 4, c.w = 37;
    v.push_back({c, {Store::NCHW, Store::NCHW}});
    c.cin = 3;
    v.push_back({c, {Store::NCHW, Store::NCHW}});
    c.cin = c.cout = c.groups = 35;
    v.push_back({c, {Store::NCHW, Store::NCHW}});
    // 3x3 depthwise on gapped NCHW rows with 2 rows of top padding (the AVX2 row kernel's masked edges)
    c.pad = opfuse::Padding(2, 1, 0, 1);
    v.push_back({c, {Store::NCHWPitch, Store::NCHWPitch}});
    return v;
}

template <class Composition, class... Specs>
void check(const ConvCase& cc, Store in, Store out, std::uint32_t seed) {
    const Layer<Specs...> layer(cc, seed, activation_weight_scale(cc));
    const ChainRun r = layer.template run<Composition>(in, out, Store::NHWC);
    INFO(cc.str() << " " << to_string(in) << " -> " << to_string(out) << ": " << r.cmp.detail);
    CHECK(r.cmp.ok);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("isa: Conv2d and epilogues on every enabled instruction set", "[isa]", TestedArchs) {
    using C = basic_conv2d<TestType>;
    INFO("arch " << TestType::name() << ", " << (xsimd::batch<float, TestType>::size) << " lanes");
    std::uint32_t seed = 200;
    for (const auto& t : isa_cases()) {
        const ConvCase& cc = t.first;
        const Store in = t.second.first, out = t.second.second;
        // fused: folding, an operand, erf; unfused (the plain conv kernel + one pass per epilogue): exp,
        // expm1, log1p, tanh
        check<fused<C, opfuse::BiasAdd, opfuse::BatchNorm, opfuse::Add, opfuse::GELU>, BiasAddSpec, BatchNormSpec,
              AddSpec, GeluErfSpec>(cc, in, out, seed++);
        check<unfused<C, opfuse::PRelu, opfuse::Sigmoid, opfuse::Add, opfuse::Elu, opfuse::Add, opfuse::Mish,
                      opfuse::Mul, opfuse::Tanh>,
              PReluSpec, SigmoidSpec, AddSpec, EluSpec, AddSpec, MishSpec, MulSpec, TanhSpec>(cc, in, out, seed++);
    }
}

TEMPLATE_LIST_TEST_CASE("isa: transposing copies (NCHW <-> NHWC rows) on every enabled instruction set", "[isa]",
                        TestedArchs) {
    INFO("arch " << TestType::name());
    for (index_t rows : {1, 3, 4, 8, 15, 16, 17, 33, 40})
        for (index_t cols : {1, 5, 8, 16, 19, 32, 37}) {
            const index_t src_stride = cols + 3, dst_stride = rows + 5;  // padded rows, as in strided views
            std::vector<float> src(std::size_t(rows * src_stride)), dst(std::size_t(cols * dst_stride), -1.f);
            for (std::size_t i = 0; i < src.size(); ++i) src[i] = float(i);
            opfuse::detail::transpose<TestType>(src.data(), src_stride, dst.data(), dst_stride, rows, cols);
            INFO(rows << " x " << cols);
            bool ok = true;
            for (index_t j = 0; j < cols; ++j)
                for (index_t i = 0; i < dst_stride; ++i) {
                    const float expected = i < rows ? src[std::size_t(i * src_stride + j)] : -1.f;  // padding untouched
                    ok &= dst[std::size_t(j * dst_stride + i)] == expected;
                }
            CHECK(ok);
        }
}

TEST_CASE("isa: the default architecture is one of the tested ones", "[isa]") {
    INFO("default arch: " << opfuse::default_arch::name());
    CHECK(std::tuple_size_v<TestedArchs> >= 1);
    // the default (widest enabled) arch is tested by every other test; it is at least as wide as the
    // widest one above
    std::size_t widest = 0;
    std::apply([&](auto... a) { ((widest = std::max<std::size_t>(widest, xsimd::batch<float, decltype(a)>::size)), ...); },
               TestedArchs{});
    CHECK(xsimd::batch<float, opfuse::default_arch>::size == widest);
}
