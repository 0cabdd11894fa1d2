// Conv2d (no epilogue) against opfuse::reference::conv2d over a sweep of shapes, layouts and strided
// views, plus known-answer cases that check the reference itself.
#include "support.hpp"

using namespace test;
using opfuse::Conv2d;
using opfuse::fused;

namespace {

const index_t kChannels[] = {1, 3, 7, 16, 17, 64, 65};
struct Kernel {
    index_t h, w;
};
const Kernel kKernels[] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {1, 7}, {7, 1}};
struct Spatial {
    index_t h, w;
};
const Spatial kSpatial[] = {{1, 1}, {5, 9}, {13, 11}, {20, 7}, {8, 8}, {3, 17}};

// Input/output storage pairs run for every case: all four dense combinations, and strided views.
const std::pair<Store, Store> kDense[] = {
    {Store::NHWC, Store::NHWC}, {Store::NCHW, Store::NCHW}, {Store::NHWC, Store::NCHW}, {Store::NCHW, Store::NHWC}};
const std::pair<Store, Store> kStrided[] = {{Store::NHWCSlice, Store::NHWCSlice}, {Store::NCHWPitch, Store::NCHWPitch},
                                            {Store::NHWCSlice, Store::NCHW},      {Store::NHWC, Store::NHWCSlice},
                                            {Store::NCHWPitch, Store::NHWC},      {Store::NCHW, Store::NCHWPitch}};

// Runs one case in every dense layout combination and three strided ones (the two "pure" strided
// pairs and one mixed pair chosen by `which`). The reference is computed once per case.
void check_case(const ConvCase& cc, std::uint32_t seed, std::size_t which) {
    INFO(cc.str());
    REQUIRE(cc.valid());
    const Layer<> layer(cc, seed);
    auto one = [&](Store in, Store out) {
        const ChainRun r = layer.run<fused<Conv2d>>(in, out, Store::NHWC);
        INFO(cc.str() << "  " << to_string(in) << " -> " << to_string(out) << ": " << r.cmp.detail);
        REQUIRE(r.cmp.ok);
    };
    for (const auto& io : kDense) one(io.first, io.second);
    one(kStrided[0].first, kStrided[0].second);
    one(kStrided[1].first, kStrided[1].second);
    const auto& mixed = kStrided[2 + which % 4];
    one(mixed.first, mixed.second);
}

ConvCase make(index_t cin, index_t cout, Kernel k, index_t stride, opfuse::Padding pad, index_t dil = 1,
              index_t groups = 1, index_t n = 1, Spatial s = {13, 11}) {
    ConvCase c;
    c.cin = cin;
    c.cout = cout;
    c.kh = k.h;
    c.kw = k.w;
    c.sh = c.sw = stride;
    c.pad = pad;
    c.dh = c.dw = dil;
    c.groups = groups;
    c.n = n;
    c.h = s.h;
    c.w = s.w;
    return c;
}

}  // namespace

TEST_CASE("reference conv2d and Conv2d agree with hand-computed results", "[conv2d][reference]") {
    auto both = [](const ConvCase& cc, const std::vector<float>& w, const std::vector<float>& x_nchw,
                   const std::vector<double>& expected) {
        INFO(cc.str());
        const auto os = cc.out_shape();
        const auto ref = opfuse::reference::conv2d(cc.params(w), w, opfuse::nchw(x_nchw.data(), cc.n, cc.cin, cc.h, cc.w));
        CHECK(ref == expected);
        for (Store s : {Store::NHWC, Store::NCHW}) {
            const Tensor in = input_tensor(s, cc.n, cc.cin, cc.h, cc.w, x_nchw);
            Tensor out(s, os[0], os[1], os[2], os[3], kSentinel);
            fused<Conv2d>(cc.params(w))(in.cview(), out.view);
            const auto got = out.get();
            CHECK(std::vector<double>(got.begin(), got.end()) == expected);
        }
    };
    // 1x1: a matrix product. Pixels (1, 2) and (-1, 0.5); OI weights [[1,2],[3,4],[-1,0]].
    both(make(2, 3, {1, 1}, 1, 0, 1, 1, 1, {1, 2}), {1, 2, 3, 4, -1, 0}, {1, -1, 2, 0.5f}, {5, 0, 11, -1, -1, 1});
    // 3x3 ones on the 3x3 ramp 1..9, padding 1, stride 2: the four 2x2 corner sums.
    both(make(1, 1, {3, 3}, 2, 1, 1, 1, 1, {3, 3}), std::vector<float>(9, 1.f), {1, 2, 3, 4, 5, 6, 7, 8, 9},
         {12, 16, 24, 28});
    // 2x2 ones with dilation 2 on the ramp: the four corners.
    both(make(1, 1, {2, 2}, 1, 0, 2, 1, 1, {3, 3}), std::vector<float>(4, 1.f), {1, 2, 3, 4, 5, 6, 7, 8, 9}, {20});
    // groups = 2, 1x1: channel 0 scaled by 2, channel 1 by 3.
    both(make(2, 2, {1, 1}, 1, 0, 1, 2, 1, {1, 2}), {2, 3}, {1, -1, 2, 0.5f}, {2, -2, 6, 1.5});
    // Asymmetric padding {top 1, left 0, bottom 0, right 2}, 1x1 identity on [[1,2],[3,4]] -> 3x4.
    both(make(1, 1, {1, 1}, 1, opfuse::Padding(1, 0, 0, 2), 1, 1, 1, {2, 2}), {1}, {1, 2, 3, 4},
         {0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0});
    // Depthwise 3x3 (groups = C = 2) at the centre of a 3x3 image: channel 1 gets the negated kernel.
    {
        std::vector<float> w(18);
        for (int i = 0; i < 9; ++i) w[std::size_t(i)] = float(i + 1), w[std::size_t(9 + i)] = -float(i + 1);
        std::vector<float> x(18, 0.f);
        x[4] = 1.f;       // channel 0: delta at the centre -> output = kernel flipped
        x[9 + 0] = 2.f;   // channel 1: 2 at the top-left corner
        both(make(2, 2, {3, 3}, 1, 1, 1, 2, 1, {3, 3}), w, x,
             {9, 8, 7, 6, 5, 4, 3, 2, 1, -10, -8, 0, -4, -2, 0, 0, 0, 0});
    }
}

TEST_CASE("conv2d: every pair of channel counts (3x3 and 1x1)", "[conv2d][sweep]") {
    std::size_t i = 0;
    for (index_t cin : kChannels)
        for (index_t cout : kChannels) {
            check_case(make(cin, cout, {3, 3}, 1, 1, 1, 1, 1, {5, 9}), 100 + std::uint32_t(i), i);
            ++i;
            check_case(make(cin, cout, {1, 1}, 1, 0, 1, 1, 3, {13, 11}), 100 + std::uint32_t(i), i);
            ++i;
        }
}

TEST_CASE("conv2d: kernel sizes x strides, paddings and dilations", "[conv2d][sweep]") {
    std::size_t i = 0;
    for (const Kernel& k : kKernels) {
        const opfuse::Padding same(k.h / 2, k.w / 2);
        // alternate the channel pair and spatial size so that tails and batches mix with every kernel
        auto chans = [&](index_t& cin, index_t& cout) {
            cin = i % 2 ? 17 : 7;
            cout = i % 3 == 0 ? 16 : i % 3 == 1 ? 65 : 17;
        };
        index_t cin, cout;
        for (index_t s = 1; s <= 3; ++s, ++i) {
            chans(cin, cout);
            check_case(make(cin, cout, k, s, same, 1, 1, 1 + 2 * (i % 2), {20, 7}), 300 + std::uint32_t(i), i);
        }
        for (index_t p = 0; p <= 3; ++p, ++i) {
            chans(cin, cout);
            check_case(make(cin, cout, k, 1, p, 1, 1, 1, {13, 11}), 300 + std::uint32_t(i), i);
        }
        const opfuse::Padding asym[] = {{3, 0, 1, 2}, {0, 2, 3, 1}, {1, 3, 0, 0}};
        for (const auto& p : asym) {
            chans(cin, cout);
            check_case(make(cin, cout, k, 1 + i % 2, p, 1, 1, 1, {13, 11}), 300 + std::uint32_t(i), i);
            ++i;
        }
        chans(cin, cout);
        check_case(make(cin, cout, k, 1, opfuse::Padding(k.h / 2 * 2, k.w / 2 * 2), 2, 1, 1, {13, 11}),
                   300 + std::uint32_t(i), i);
        ++i;
        // anisotropic stride and dilation
        ConvCase c = make(16, 17, k, 1, opfuse::Padding(1, 2), 1, 1, 1, {20, 7});
        c.sh = 2, c.sw = 1, c.dh = 1, c.dw = 2;
        if (c.valid()) check_case(c, 300 + std::uint32_t(i), i);
        ++i;
    }
}

TEST_CASE("conv2d: grouped and depthwise", "[conv2d][sweep][depthwise]") {
    std::size_t i = 0;
    // groups = 2 (and 4), including per-group channel tails (17, 7, 65 per group)
    const index_t grouped[][3] = {{16, 64, 2}, {64, 16, 2}, {34, 14, 2}, {14, 130, 2}, {64, 64, 4}, {68, 28, 4}, {6, 6, 3}};
    for (const auto& g : grouped) {
        check_case(make(g[0], g[1], {3, 3}, 1, 1, 1, g[2], 1, {13, 11}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(g[0], g[1], {5, 5}, 2, opfuse::Padding(2, 1, 0, 2), 1, g[2], 3, {20, 7}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(g[0], g[1], {1, 1}, 1, 0, 1, g[2], 1, {5, 9}), 500 + std::uint32_t(i), i);
        ++i;
    }
    // depthwise: groups = in = out
    for (index_t c : kChannels) {
        check_case(make(c, c, {3, 3}, 1, 1, 1, c, 1, {13, 11}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {3, 3}, 2, opfuse::Padding(0, 1, 1, 0), 1, c, 3, {20, 7}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {5, 5}, 1, 2, 1, c, 1, {5, 9}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {7, 7}, 1, 3, 2, c, 1, {20, 7}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {1, 7}, 3, opfuse::Padding(0, 3), 1, c, 1, {13, 11}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {7, 1}, 1, opfuse::Padding(3, 0, 3, 0), 1, c, 1, {1, 1}), 500 + std::uint32_t(i), i);
        ++i;
        // the row sweep of 3x3/5x5: several tiles per row, a remainder pixel, padding only on the right,
        // and dilation along H only (the sweep needs dilation 1 along W, not along H)
        check_case(make(c, c, {5, 5}, 2, opfuse::Padding(2, 0, 1, 3), 1, c, 2, {9, 31}), 500 + std::uint32_t(i), i);
        ++i;
        ConvCase dilated_rows = make(c, c, {3, 3}, 1, opfuse::Padding(2, 1), 1, c, 1, {9, 27});
        dilated_rows.dh = 2;
        check_case(dilated_rows, 500 + std::uint32_t(i), i);
        ++i;
    }
    // Planar (NCHW -> NCHW, stride 1 along the rows; conv2d_depthwise_planar.hpp): rows shorter than a
    // vector, one group of 4 vectors exactly and one pixel more, stride 2 and dilation 3 between rows,
    // padding wider than the kernel's reach, a 9x9 kernel (taller than the planar ring: band path), and
    // 3x3 column sums over multi-group rows.
    for (index_t c : {index_t(3), index_t(17)}) {
        for (index_t w : {index_t(5), index_t(64), index_t(65)}) {
            check_case(make(c, c, {3, 3}, 1, 1, 1, c, 2, {6, w}), 500 + std::uint32_t(i), i);
            ++i;
        }
        ConvCase strided_rows = make(c, c, {3, 5}, 1, opfuse::Padding(3, 4), 1, c, 1, {11, 23});
        strided_rows.sh = 2, strided_rows.dh = 3;
        check_case(strided_rows, 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {9, 9}, 1, 4, 1, c, 1, {12, 19}), 500 + std::uint32_t(i), i);
        ++i;
        // 3x3 column sums (AVX-512): rows of several groups with a partial last vector, left padding 2
        // and right 0, 2 rows of top padding, stride 2 and dilation 2 between rows.
        ConvCase column_sums = make(c, c, {3, 3}, 1, opfuse::Padding(2, 2, 1, 0), 1, c, 1, {9, 130});
        column_sums.sh = 2, column_sums.dh = 2;
        check_case(column_sums, 500 + std::uint32_t(i), i);
        ++i;
    }
    // Other channel-strided (NCHW) inputs run on per-row NHWC band copies of blocks of channels: rows wide
    // enough to need several channel blocks per row (3 x 200 x 16 floats per block), and rows too wide for
    // one block of a single channel vector (the per-channel fallback); check_case's NCHW -> NHWC pair.
    for (index_t c : {index_t(37), index_t(65)}) {
        check_case(make(c, c, {3, 3}, 1, 1, 1, c, 2, {4, 200}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {3, 3}, 2, opfuse::Padding(1, 0, 1, 2), 1, c, 1, {5, 203}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, c, {7, 7}, 1, 3, 1, c, 1, {3, 400}), 500 + std::uint32_t(i), i);
        ++i;
    }
    // depthwise with a channel multiplier: out = 2 * in (and 3 * in), groups = in
    for (index_t c : {index_t(1), index_t(3), index_t(16), index_t(17), index_t(64)}) {
        check_case(make(c, 2 * c, {3, 3}, 1, 1, 1, c, 1, {13, 11}), 500 + std::uint32_t(i), i);
        ++i;
        check_case(make(c, 3 * c, {5, 5}, 2, opfuse::Padding(1, 2, 2, 1), 2, c, 3, {20, 7}), 500 + std::uint32_t(i), i);
        ++i;
    }
}

TEST_CASE("conv2d: depthwise row sweep, every count of pixels after the full tiles", "[conv2d][depthwise][dw_tail]") {
    // The NHWC row sweep runs tiles of 4-6 pixels (per ISA and kernel), then the rest of the pixels whose
    // taps stay inside the row as one shorter tile, then single pixels: widths 1..19 cover every remainder
    // for 3x3 and 5x5, stride 1 and 2, with full and partial channel vectors.
    std::size_t i = 0;
    for (index_t w = 1; w <= 19; ++w)
        for (index_t c : {8, 19}) {
            check_case(make(c, c, {3, 3}, 1, 1, 1, c, 1, {4, w}), 900 + std::uint32_t(i), i);
            ++i;
            check_case(make(c, c, {3, 3}, 2, 1, 1, c, 1, {3, w}), 900 + std::uint32_t(i), i);
            ++i;
            check_case(make(c, c, {5, 5}, 1, 2, 1, c, 1, {3, w}), 900 + std::uint32_t(i), i);
            ++i;
        }
}

TEST_CASE("conv2d: planar depthwise 3x3 rows of every length class", "[conv2d][depthwise][planar_dw]") {
    // The 3x3 column sums (AVX-512) run groups of 4 output vectors while the group's last vector still
    // needs the next vector's sums (its lane 14 is a pixel), then single vectors, computing the next
    // vector's sums only where lane 14 is a pixel: rows ending on every lane around the 16-lane vectors
    // and 64-lane groups, with symmetric padding, no horizontal padding and padding 2 on the right only.
    // On AVX2 the padding-1 cases run conv2d_depthwise_rows3x3.hpp: rows of 1, 2 or more 8-lane vectors
    // ending on every lane, with 4-vector groups and single vectors between the two edge vectors, and
    // top/bottom padding of 0 to 2 rows (kernel rows skipped at both ends of the plane).
    std::size_t i = 0;
    for (index_t w : {1, 2, 13, 14, 15, 16, 17, 18, 30, 31, 32, 46, 47, 56, 61, 62, 63, 64, 65, 66, 78, 79, 112, 127}) {
        check_case(make(5, 5, {3, 3}, 1, 1, 1, 5, 1, {4, w}), 950 + std::uint32_t(i), i);
        ++i;
        check_case(make(4, 4, {3, 3}, 1, opfuse::Padding(2, 1, 0, 1), 1, 4, 1, {3, w}), 950 + std::uint32_t(i), i);
        ++i;
        if (w >= 3) {
            check_case(make(3, 3, {3, 3}, 1, opfuse::Padding(1, 0), 1, 3, 1, {5, w}), 950 + std::uint32_t(i), i);
            ++i;
        }
        check_case(make(2, 2, {3, 3}, 1, opfuse::Padding(0, 0, 1, 2), 1, 2, 1, {3, w}), 950 + std::uint32_t(i), i);
        ++i;
    }
}

TEST_CASE("conv2d: 3x3 same depthwise on flattened NCHW planes", "[conv2d][depthwise][flat_dw]") {
    // check_case's NCHW -> NCHW pair runs conv2d_depthwise_flat.hpp on AVX-512 (dense planes, stride 1,
    // padding 1): planes smaller than one vector, single rows and columns (every pixel at a border), rows
    // shorter and longer than a vector so that vectors cross 0, 1 or several row ends, planes ending on
    // every kind of partial vector, batches, and few planes (ranges of vectors per task) as well as many.
    // Its NCHWPitch pair (gapped rows) runs the row kernel instead.
    std::size_t i = 0;
    for (Spatial s : {Spatial{1, 1}, Spatial{1, 5}, Spatial{5, 1}, Spatial{2, 3}, Spatial{3, 5}, Spatial{4, 4},
                      Spatial{1, 17}, Spatial{17, 1}, Spatial{7, 7}, Spatial{3, 16}, Spatial{5, 15},
                      Spatial{6, 17}, Spatial{9, 56}, Spatial{4, 33}}) {
        for (index_t c : {index_t(2), index_t(17)}) {
            check_case(make(c, c, {3, 3}, 1, 1, 1, c, 1 + i % 2, s), 1100 + std::uint32_t(i), i);
            ++i;
        }
    }
}

TEST_CASE("conv2d: 3x3 same dense layers on flattened NCHW planes", "[conv2d][dense_flat]") {
    // check_case's NCHW -> NCHW pair runs conv2d_dense_flat.hpp on AVX-512 (one group, stride 1, padding
    // 1, dense planes of at least 8 vectors): rows shorter and longer than a vector and multiples of it
    // (vectors crossing 0, 1 or several row ends), planes ending on a partial vector, chunks dealt as 3 + 3
    // + 2 (8 vectors) and 3 + 3 + 3 + 2 + 2 (13), several chunks of a large plane, output channel counts
    // that end inside an 8-channel tile and span several 64-channel blocks, and batches. Smaller planes
    // (7x7) and the NCHWPitch pair (gapped rows) take the band path.
    std::size_t i = 0;
    for (Spatial s : {Spatial{8, 16}, Spatial{1, 128}, Spatial{128, 1}, Spatial{11, 13}, Spatial{14, 14},
                      Spatial{5, 33}, Spatial{24, 20}, Spatial{9, 56}}) {
        check_case(make(16, 24, {3, 3}, 1, 1, 1, 1, 1 + i % 2, s), 1200 + std::uint32_t(i), i);
        ++i;
        check_case(make(13, 70, {3, 3}, 1, 1, 1, 1, 1, s), 1200 + std::uint32_t(i), i);
        ++i;
    }
    check_case(make(33, 131, {3, 3}, 1, 1, 1, 1, 1, {14, 14}), 1250, 0);
}

TEST_CASE("conv2d: spatial sizes with tails and batches", "[conv2d][sweep]") {
    std::size_t i = 0;
    for (const Spatial& s : kSpatial)
        for (index_t n : {index_t(1), index_t(3)}) {
            check_case(make(17, 65, {3, 3}, 1, 1, 1, 1, n, s), 700 + std::uint32_t(i), i);
            ++i;
            check_case(make(65, 17, {1, 1}, 1 + i % 3, 0, 1, 1, n, s), 700 + std::uint32_t(i), i);
            ++i;
            check_case(make(7, 16, {7, 7}, 2, 3, 1, 1, n, s), 700 + std::uint32_t(i), i);
            ++i;
            check_case(make(64, 64, {3, 3}, 1, 1, 1, 64, n, s), 700 + std::uint32_t(i), i);
            ++i;
        }
    // a few larger ones: several full tiles per row, NV=2 blocks, long reductions
    check_case(make(64, 65, {3, 3}, 1, 1, 1, 1, 1, {20, 20}), 750, 0);
    check_case(make(65, 64, {7, 7}, 1, 3, 1, 1, 1, {9, 14}), 751, 1);
    check_case(make(3, 64, {7, 7}, 2, 3, 1, 1, 1, {32, 32}), 752, 2);
}

TEST_CASE("conv2d: channel-contiguous images tiled region by region", "[conv2d][regions]") {
    // The NHWC -> NHWC pair of check_case runs the direct tiles over the regions of pixel_regions
    // (interior, top and bottom rows, left and right columns), each tiled on its own: 7x7 (interior 5x5,
    // 1-pixel tails), two rows of top padding (5x5 kernel), strides and dilations that move the region
    // borders, asymmetric padding with no left region, images with no interior at all, and batches.
    std::uint32_t seed = 790;
    std::size_t i = 0;
    auto run = [&](const ConvCase& cc) { check_case(cc, seed++, i++); };
    run(make(16, 37, {3, 3}, 1, 1, 1, 1, 1, {7, 7}));
    run(make(20, 16, {3, 3}, 1, 1, 1, 1, 2, {14, 14}));
    run(make(16, 24, {5, 5}, 1, 2, 1, 1, 1, {9, 11}));
    run(make(16, 16, {3, 3}, 2, 1, 1, 1, 1, {8, 11}));
    run(make(16, 16, {3, 3}, 1, 2, 2, 1, 1, {10, 9}));
    run(make(16, 33, {3, 3}, 1, opfuse::Padding(0, 0, 3, 1), 1, 1, 1, {6, 7}));
    run(make(16, 16, {3, 3}, 1, 1, 1, 1, 1, {2, 3}));
    run(make(16, 16, {3, 3}, 1, 1, 1, 1, 3, {1, 1}));
    run(make(12, 16, {3, 5}, 3, opfuse::Padding(2, 1, 0, 4), 1, 1, 1, {12, 13}));
    // >= 64 output channels: the AVX-512 6x4 tile with graded heights (6, 5, 4, 3) dealing each chunk's
    // pixels evenly: 25 = 5 x 5, 7 = 4 + 3, 5; 144 = 24 x 6, 14 = 5 + 5 + 4, 12 = 6 + 6; 13 = 5 + 4 + 4
    run(make(16, 64, {3, 3}, 1, 1, 1, 1, 1, {7, 7}));
    run(make(24, 80, {3, 3}, 1, 1, 1, 1, 2, {14, 14}));
    run(make(8, 130, {5, 5}, 1, 2, 1, 1, 1, {17, 13}));
}

TEST_CASE("conv2d: band rows dealt over graded tile heights", "[conv2d][band][graded]") {
    // check_case's channel-strided (NCHW) inputs run the band path, one output row at a time: on AVX-512,
    // with 64 or more output channels, each row is dealt evenly over 6x4 tiles of heights 6 to 3. Rows of
    // 2, 3, 5, 6, 7 (4 + 3), 11 (6 + 5), 13 (5 + 4 + 4), 14 (5 + 5 + 4) and 28 pixels; a 5x5 kernel with a
    // channel tail (70 = 64 + 6) on two images; stride 2 (rows of 11); and a 3-channel first layer, which
    // also takes the band path from an NHWC input. Short reductions (kw * cin < 32) with 32 or more output
    // channels run 3x4 tiles on AVX2 too: with a channel tail (40 = 32 + 8, 70) and stride 2.
    std::uint32_t seed = 1500;
    std::size_t i = 0;
    for (index_t w : {2, 3, 5, 6, 7, 11, 13, 14, 28}) check_case(make(24, 64, {3, 3}, 1, 1, 1, 1, 1, {4, w}), seed++, i++);
    check_case(make(16, 70, {5, 5}, 1, 2, 1, 1, 2, {6, 13}), seed++, i++);
    check_case(make(20, 64, {3, 3}, 2, 1, 1, 1, 1, {9, 21}), seed++, i++);
    check_case(make(3, 64, {3, 3}, 1, 1, 1, 1, 1, {5, 17}), seed++, i++);
    check_case(make(5, 40, {5, 5}, 1, 2, 1, 1, 1, {9, 10}), seed++, i++);
    check_case(make(3, 70, {3, 3}, 2, 1, 1, 1, 2, {11, 9}), seed++, i++);
}

TEST_CASE("conv2d: a band window that slides forward through its buffer, then moves back", "[conv2d][band]") {
    // The band's 16384 floats hold 5 rows of 102 columns x 32 channels (3x3 pad 1; channel-strided inputs
    // take the band path: at stride 1 the gapped NCHWPitch ones on AVX-512, all of them on AVX2/SSE): the
    // 3-row window moves forward twice, then moves its two kept rows to the buffer's start, within each
    // task's 8 output rows (12 rows: a chunk of 8 and one of 4). Stride 2 (101 columns): slides of 2 rows,
    // one forward, then the kept row moves back.
    std::uint32_t seed = 1550;
    std::size_t i = 0;
    check_case(make(32, 16, {3, 3}, 1, 1, 1, 1, 1, {12, 100}), seed++, i++);
    check_case(make(32, 16, {3, 3}, 2, 1, 1, 1, 1, {23, 100}), seed++, i++);
}

TEST_CASE("conv2d: band rows too wide for the stack run in column segments", "[conv2d][band][segments]") {
    // A band holds 16384 floats: rows of (kernel rows) x (input columns) x (input channels) beyond that are
    // cut into segments of output columns, each task transposing only its segment's input columns (zeros
    // past the image). 64 channels x 3 rows x 100 columns: 2 segments (56 + 44 on AVX2, 64 + 36 on
    // AVX-512); stride 2 over 181 columns; a 5x5 kernel with a channel tail (40 -> 70) on two images; and a
    // first layer 1900 columns wide, which also runs the band from an NHWC input (short reduction).
    std::uint32_t seed = 1600;
    std::size_t i = 0;
    check_case(make(64, 20, {3, 3}, 1, 1, 1, 1, 1, {5, 100}), seed++, i++);
    check_case(make(48, 16, {3, 3}, 2, 1, 1, 1, 1, {7, 181}), seed++, i++);
    check_case(make(40, 70, {5, 5}, 1, 2, 1, 1, 2, {6, 90}), seed++, i++);
    check_case(make(3, 16, {3, 3}, 1, 1, 1, 1, 1, {3, 1900}), seed++, i++);
}

TEST_CASE("conv2d: column segments of an NCHW output above the streaming threshold", "[conv2d][band][segments]") {
    // 24 -> 64 channels, 3x3 pad 1, at 70 x 240, NCHW in and out: the rows need 3 x 242 x 24 floats, more
    // than a band holds, so they run in segments whose staged output columns are transposed into the
    // 4.3 MB aligned planes, with streaming stores where a segment starts on a vector boundary. Checked
    // against the NHWC path (no segments, no staging) everywhere and the double reference at 400 points.
    const index_t H = 70, W = 240, C = 24, K = 64;
    std::mt19937 g(41);
    const auto x = uniform(sz(C * H * W), -1, 1, g), w = uniform(sz(K * C * 9), -0.25f, 0.25f, g);
    opfuse::aligned_buffer y(sz(K * H * W));
    std::vector<float> x_nhwc(sz(C * H * W)), y_nhwc(sz(K * H * W));
    for (index_t c = 0; c < C; ++c)
        for (index_t p = 0; p < H * W; ++p) x_nhwc[sz(p * C + c)] = x[sz(c * H * W + p)];
    REQUIRE(opfuse::detail::can_stream<opfuse::default_arch>(y.data(), H * W, W, K * H * W, y.size() * sizeof(float)));
    opfuse::conv2d_params p;
    p.in_channels = C, p.out_channels = K, p.kernel = 3, p.padding = 1, p.weights = w;
    const fused<Conv2d> conv(p);
    conv(opfuse::nchw<const float>(x.data(), 1, C, H, W), opfuse::nchw(y.data(), 1, K, H, W));
    conv(opfuse::nhwc<const float>(x_nhwc.data(), 1, H, W, C), opfuse::nhwc(y_nhwc.data(), 1, H, W, K));
    std::size_t wrong = 0;
    for (index_t k = 0; k < K; ++k)
        for (index_t q = 0; q < H * W; ++q)  // |sum| <= 216 * 0.25: float rounding stays below 1e-4
            wrong += std::abs(y[sz(k * H * W + q)] - y_nhwc[sz(q * K + k)]) > 2e-4;
    CHECK(wrong == 0);
    std::uniform_int_distribution<index_t> pick(0, K * H * W - 1);
    for (int t = 0; t < 400; ++t) {
        const index_t i = pick(g), k = i / (H * W), oy = i / W % H, ox = i % W;
        double want = 0;
        for (index_t c = 0; c < C; ++c)
            for (index_t ky = 0; ky < 3; ++ky)
                for (index_t kx = 0; kx < 3; ++kx) {
                    const index_t iy = oy + ky - 1, ix = ox + kx - 1;
                    if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                        want += double(x[sz((c * H + iy) * W + ix)]) * w[sz(((k * C + c) * 3 + ky) * 3 + kx)];
                }
        INFO("channel " << k << " pixel (" << oy << ", " << ox << ")");
        REQUIRE(std::abs(y[sz(i)] - want) < 2e-4);
    }
}

TEST_CASE("conv2d: large weight blocks reduced in passes over kernel rows", "[conv2d][regions][passes]") {
    // A channel block whose packed weights exceed pass_weight_bytes (512 KiB) runs its tiles once per
    // group of kernel rows, carrying the accumulators between passes in a stack buffer: 2 + 1 rows (256
    // channels, 3x3, with a channel tail), 3 + 2 rows (5x5), one row per pass (1900 channels: this case
    // splits on every ISA, also SSE2's 8-channel blocks), strided and dilated taps (no merged rows), and
    // a 30x29 image whose tiles overflow the buffer, so its chunks are shortened and spread over tasks.
    std::uint32_t seed = 900;
    std::size_t i = 0;
    auto run = [&](const ConvCase& cc) { check_case(cc, seed++, i++); };
    run(make(256, 70, {3, 3}, 1, 1, 1, 1, 2, {9, 11}));
    run(make(110, 64, {5, 5}, 1, 2, 1, 1, 1, {12, 10}));
    run(make(1900, 8, {3, 3}, 1, 1, 1, 1, 1, {5, 6}));
    run(make(240, 64, {3, 3}, 2, 2, 2, 1, 1, {11, 12}));
    run(make(232, 64, {3, 3}, 1, 1, 1, 1, 1, {30, 29}));
}

TEST_CASE("conv2d: small NCHW images with large weights run on whole-image bands", "[conv2d][image_band]") {
    // check_case's channel-strided inputs (NCHW, NCHWPitch) run conv2d_image_band.hpp when a channel block's
    // packed weights exceed pass_weight_bytes: the padded image transposed one slice of input channels at a
    // time, tiles along the flattened output pixels, sums parked between slices.
    std::uint32_t seed = 1700;
    std::size_t i = 0;
    auto run = [&](const ConvCase& cc) { check_case(cc, seed++, i++); };
    // Every ISA (blocks of 8, 16 or 32 channels): 5x5 over 700 channels in 5 to 7 slices, a channel tail
    // (20 = 8 + 8 + 4 on SSE2), two images, tiles ending inside a row (6x7).
    run(make(700, 20, {5, 5}, 1, 2, 1, 1, 2, {6, 7}));
    // AVX-512 (64-channel blocks): 512 @7-like, 4 blocks (the last one 8 channels) in one task, 6 slices
    // of 50 channels, 9 graded tiles; stride 2 + dilation 2 + asymmetric padding (rows and columns read past
    // the image on one side only); no padding on a 13x14 image, whose 11x12 outputs are 22 tiles per block,
    // more than half the partial sums, so each task holds one block.
    run(make(300, 200, {3, 3}, 1, 1, 1, 1, 1, {7, 7}));
    run(make(256, 64, {3, 3}, 2, opfuse::Padding(0, 1, 2, 1), 2, 1, 1, {11, 12}));
    run(make(240, 130, {3, 3}, 1, 0, 1, 1, 1, {13, 14}));
}

TEST_CASE("conv2d: 1x1 layers on packed NHWC run as a GEMM", "[conv2d][gemm]") {
    // The NHWC -> NHWC pair of check_case runs Linear's GEMM kernel (the other pairs the direct tiles):
    // K split into two L2 slices (1600 x 64 floats), a channel tail (65, 130), images that end inside a
    // register tile (batches of 7x7 and 3x5), several row blocks and row tails of every length.
    check_case(make(1600, 65, {1, 1}, 1, 0, 1, 1, 2, {3, 5}), 760, 0);
    check_case(make(16, 64, {1, 1}, 1, 0, 1, 1, 3, {7, 7}), 761, 1);
    check_case(make(33, 130, {1, 1}, 1, 0, 1, 1, 1, {40, 41}), 762, 2);
    for (index_t w = 1; w <= 14; ++w) check_case(make(8, 32, {1, 1}, 1, 0, 1, 1, 2, {1, w}), 770 + std::uint32_t(w), w);
}

TEST_CASE("conv2d: 1x1 layers on planar NCHW tensors run along the pixels", "[conv2d][pointwise_planar]") {
    // check_case's NCHW -> NCHW pair runs conv2d_pointwise_planar.hpp (8 channels x 48 pixels per tile on
    // AVX-512): planes read in place whose last chunk of pixels is masked (95 = 48 + 47, 84 = 48 + 36,
    // 80 = 48 + 32, 2500 = 52 * 48 + 4 pixels), channel counts that end inside a tile (37, 5), strided
    // inputs and gapped rows (NCHWPitch) gathered into a panel with row segments that cross output rows,
    // a 300-channel panel (the largest under the stack limit) and a 400-channel layer beyond it (the
    // direct path).
    check_case(make(16, 8, {1, 1}, 1, 0, 1, 1, 1, {5, 19}), 780, 0);
    check_case(make(16, 5, {1, 1}, 1, 0, 1, 1, 2, {6, 14}), 781, 1);
    check_case(make(24, 40, {1, 1}, 1, 0, 1, 1, 1, {4, 20}), 782, 2);
    check_case(make(64, 72, {1, 1}, 1, 0, 1, 1, 2, {50, 50}), 783, 3);
    check_case(make(300, 37, {1, 1}, 2, 0, 1, 1, 2, {23, 31}), 784, 0);
    check_case(make(400, 24, {1, 1}, 2, 0, 1, 1, 1, {9, 10}), 785, 1);
    ConvCase anisotropic = make(33, 17, {1, 1}, 1, 0, 1, 1, 1, {12, 29});
    anisotropic.sh = 3, anisotropic.sw = 2;
    check_case(anisotropic, 786, 2);
}

TEST_CASE("conv2d: short reductions on planar NCHW tensors run along the rows", "[conv2d][planar_rows]") {
    // check_case's NCHW -> NCHW pair runs conv2d_planar_rows.hpp when kw * Cin < 32 and the output rows
    // hold two vectors: tiles of 3, 2 and 1 vectors with a partial last vector (45, 70 = 48 + 22 and
    // 60 = 48 + 12 columns), channel counts that end inside a tile (5, 17), vertical and asymmetric
    // padding (taps in the padding skipped), stride 2 between rows, dilation 2 and 7-tall kernels.
    check_case(make(3, 64, {3, 3}, 1, 1, 1, 1, 2, {9, 70}), 790, 0);
    check_case(make(1, 5, {5, 5}, 1, opfuse::Padding(2, 0, 1, 4), 1, 1, 1, {7, 45}), 791, 1);
    check_case(make(7, 17, {3, 3}, 1, opfuse::Padding(3, 1), 2, 1, 1, {10, 40}), 792, 2);
    ConvCase stem = make(3, 24, {7, 7}, 1, 3, 1, 1, 1, {17, 60});
    stem.sh = 2;
    check_case(stem, 793, 3);
    check_case(make(2, 9, {7, 1}, 1, opfuse::Padding(3, 0), 1, 1, 1, {12, 48}), 794, 0);
}

TEST_CASE("conv2d: a 1x1 layer with an output above the streaming threshold", "[conv2d][gemm]") {
    // 16 -> 64 channels at 128 x 128: a 4 MiB aligned output, written with streaming stores by the GEMM.
    const index_t H = 128, W = 128, C = 16, K = 64;
    std::mt19937 g(31);
    const auto x = uniform(sz(H * W * C), -1, 1, g), w = uniform(sz(K * C), -0.25f, 0.25f, g);
    const auto bias = uniform(sz(K), -0.5f, 0.5f, g);
    opfuse::aligned_buffer y(sz(H * W * K));
    REQUIRE(opfuse::detail::can_stream<opfuse::default_arch>(y.data(), K, W * K, H * W * K, y.size() * sizeof(float)));
    opfuse::conv2d_params p;
    p.in_channels = C, p.out_channels = K, p.kernel = 1, p.weights = w;
    const auto in = opfuse::nhwc<const float>(x.data(), 1, H, W, C);
    fused<Conv2d, opfuse::BiasAdd, opfuse::Relu>(p, {bias}, {})(in, opfuse::nhwc(y.data(), 1, H, W, K));
    const auto ref = opfuse::reference::conv2d(p, w, in);  // (n, k, y, x)
    std::size_t wrong = 0;
    for (index_t yy = 0; yy < H; ++yy)
        for (index_t xx = 0; xx < W; ++xx)
            for (index_t k = 0; k < K; ++k) {
                const double want = std::max(0.0, ref[sz((k * H + yy) * W + xx)] + bias[sz(k)]);
                // |sum| <= 16 * 0.25: float rounding stays below 1e-5, a dropped tap is ~0.1
                wrong += std::abs(y[sz((yy * W + xx) * K + k)] - want) > 1e-4;
            }
    CHECK(wrong == 0);
}

TEST_CASE("conv2d: an NCHW first layer with an output above the streaming threshold", "[conv2d][band]") {
    // 3 -> 64 channels, 3x3 pad 1, at 128 x 128, NCHW in and out: the band path of short reductions, whose
    // staged output rows are transposed into the 4 MiB aligned planes with streaming stores.
    const index_t H = 128, W = 128, C = 3, K = 64;
    std::mt19937 g(37);
    const auto x = uniform(sz(C * H * W), -1, 1, g), w = uniform(sz(K * C * 9), -0.25f, 0.25f, g);
    const auto bias = uniform(sz(K), -0.5f, 0.5f, g);
    opfuse::aligned_buffer y(sz(K * H * W));
    REQUIRE(opfuse::detail::can_stream<opfuse::default_arch>(y.data(), H * W, W, K * H * W, y.size() * sizeof(float)));
    opfuse::conv2d_params p;
    p.in_channels = C, p.out_channels = K, p.kernel = 3, p.padding = 1, p.weights = w;
    const auto in = opfuse::nchw<const float>(x.data(), 1, C, H, W);
    fused<Conv2d, opfuse::BiasAdd, opfuse::Relu>(p, {bias}, {})(in, opfuse::nchw(y.data(), 1, K, H, W));
    const auto ref = opfuse::reference::conv2d(p, w, in);  // (n, k, y, x)
    std::size_t wrong = 0;
    for (index_t i = 0; i < K * H * W; ++i) {
        const double want = std::max(0.0, ref[sz(i)] + bias[sz(i / (H * W))]);
        // |sum| <= 27 * 0.25: float rounding stays below 1e-5, a dropped tap is ~0.1
        wrong += std::abs(y[sz(i)] - want) > 1e-4;
    }
    CHECK(wrong == 0);
}

TEST_CASE("conv2d: seeded random sample of the whole parameter space", "[conv2d][sweep][random]") {
    std::mt19937 g(20240611);
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); };
    std::size_t done = 0, tries = 0;
    while (done < 200) {
        REQUIRE(++tries < 10000);
        ConvCase c;
        c.cin = kChannels[pick(7)];
        c.cout = kChannels[pick(7)];
        const Kernel k = kKernels[pick(6)];
        c.kh = k.h, c.kw = k.w;
        c.sh = 1 + pick(3), c.sw = pick(3) ? c.sh : 1 + pick(3);
        switch (pick(3)) {
            case 0: c.pad = opfuse::Padding(pick(4)); break;
            case 1: c.pad = opfuse::Padding(pick(4), pick(4)); break;
            default: c.pad = opfuse::Padding(pick(4), pick(4), pick(4), pick(4)); break;
        }
        c.dh = 1 + pick(2), c.dw = pick(3) ? c.dh : 1 + pick(2);
        switch (pick(4)) {
            case 0: c.groups = 1; break;
            case 1:  // two groups, per-group counts from the list
                c.groups = 2, c.cin *= 2, c.cout *= 2;
                break;
            case 2: c.groups = c.cout = c.cin; break;                    // depthwise
            default: c.groups = c.cin, c.cout = c.cin * (2 + pick(2)); break;  // channel multiplier
        }
        c.n = pick(2) ? 1 : 3;
        const Spatial s = kSpatial[pick(6)];
        c.h = s.h, c.w = s.w;
        if (!c.valid() || c.macs() > 3'000'000) continue;
        check_case(c, 1000 + std::uint32_t(done), done);
        ++done;
    }
}

// The sweep's comparisons must be able to fail: dropping a single kernel tap (one weight zeroed in the
// kernel's copy only) is detected even at the longest reduction of the suite (65 channels x 7x7), and
// so is a relative error of 1e-3 in one weight of a 3x3 layer (L = 153).
TEST_CASE("the conv comparison detects one missing tap", "[conv2d][meta]") {
    const MetaTest meta;
    for (auto k : {Kernel{7, 7}, Kernel{3, 3}, Kernel{1, 1}}) {
        Layer<> layer(make(65, 64, k, 1, opfuse::Padding(k.h / 2, k.w / 2), 1, 1, 1, {9, 8}), 900);
        // the weight of median magnitude of output channel 63 (the last of the NV=2 block / a tail)
        const std::size_t per_out = layer.weights.size() / 64, base = 63 * per_out;
        std::vector<std::pair<float, std::size_t>> mags;
        for (std::size_t j = 0; j < per_out; ++j) mags.push_back({std::fabs(layer.weights[base + j]), base + j});
        std::nth_element(mags.begin(), mags.begin() + long(per_out / 2), mags.end());
        layer.kernel_weights[mags[per_out / 2].second] = 0.f;
        for (Store s : {Store::NHWC, Store::NCHW}) {
            const ChainRun r = layer.run<fused<Conv2d>>(s, s, s);
            INFO(layer.cc.str() << " " << to_string(s) << ": " << r.cmp.detail);
            CHECK_FALSE(r.cmp.ok);
            CHECK(r.cmp.outside == 0);
        }
    }
    Layer<> layer(make(17, 16, {3, 3}, 1, 1, 1, 1, 1, {5, 9}), 901);
    layer.kernel_weights[5] *= 1.f + 1e-3f;
    const ChainRun r = layer.run<fused<Conv2d>>(Store::NHWC, Store::NHWC, Store::NHWC);
    INFO(r.cmp.detail);
    CHECK_FALSE(r.cmp.ok);
}

// ... and a write outside the output view (here: into a channel outside the slice, and into the guard
// after the buffer's footprint) is reported even when every element of the view is right.
TEST_CASE("the output check detects writes outside the view", "[conv2d][meta]") {
    const MetaTest meta;
    const Layer<> layer(make(17, 16, {3, 3}, 1, 1, 1, 1, 1, {5, 9}), 902);
    ChainRun r = layer.run<fused<Conv2d>>(Store::NHWC, Store::NHWCSlice, Store::NHWC);
    REQUIRE(r.cmp.ok);
    auto expected = [&](std::size_t i) { return layer.expected[i]; };
    r.out.view(0, 15, 4, 8) = r.out.view(0, 15, 4, 8);  // a write inside the view: fine
    CHECK(compare(r.out, kSentinel, expected).ok);
    r.out.buf[kGuard + 2 + 16] = 0.f;  // pixel 0, channel 18 of the 21-channel buffer (the slice is 2..17)
    CHECK_FALSE(compare(r.out, kSentinel, expected).ok);
    r.out.buf[kGuard + 2 + 16] = kSentinel;
    CHECK(compare(r.out, kSentinel, expected).ok);
    r.out.buf.back() = 1.f;  // the guard after the footprint
    CHECK(compare(r.out, kSentinel, expected).outside == 1);
}
