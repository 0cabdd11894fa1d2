// Unpadded 1x1 convolution on planar (NCHW) tensors as the GEMM
//     out[co][p] = sum_ci w[co][ci] * in[ci][p]          (p: output pixel of one image, row-major)
// vectorized along the pixels: a register tile is MR output channels x NV vectors of consecutive pixels,
// and one reduction step loads NV pixel vectors of one input channel and broadcasts MR weights. Nothing
// is transposed, where the direct kernel's NCHW path moves every input and output value through an NHWC
// band (measured: 1.3-1.4x the NHWC time on the ResNet 1x1 shapes).
//
// Pixels are numbered row-major, so one vector may run from the end of an output row into the next: the
// output plane and every operand plane of the chain must have no gaps between rows (an along_width Site
// whose lanes continue at the same address pitch; checked by pointwise_planar_supports).
//
// The tile reads the input planes in place when they are dense and the stride is 1 (the last, partial
// chunk of pixels with masked loads); otherwise (strided, gapped rows) each chunk of pixels is first
// gathered into a zero-padded stack panel [Cin][chunk]. Weights are the conv's packed [block][Cin][NR]
// panels: MR consecutive lanes of a block are the MR channels of a tile (MR divides NR).
#pragma once

#include <algorithm>

#include "../core/static_for.hpp"
#include "../epilogue/site.hpp"
#include "../kernel/epilogue_tile.hpp"
#include "../kernel/gemm_tile.hpp"
#include "../kernel/nhwc_band.hpp"
#include "../kernel/vector_io.hpp"

namespace opfuse::detail {

struct pointwise_planar_plan {
    index_t cin, cout;
    index_t nr;            // lanes of a packed weight block: weight (co, ci) at [(co / nr * cin + ci) * nr + co % nr]
    index_t stride_h, stride_w;
    const float* weights;  // zero-padded past cout to whole blocks
    const float* bias;     // zero-padded past cout
};

// Register tile: 8 channels x 3 vectors (24 of 32 zmm) on AVX-512; 4 x 3 (12 of 16) on AVX2/SSE.
template <class Arch>
struct pointwise_planar_tile {
    static constexpr int simd = int(xsimd::batch<float, Arch>::size);
    static constexpr int mr = simd >= 16 ? 8 : 4;
    static constexpr int nv = 3;
    static constexpr index_t chunk = nv * simd;  // pixels of one tile
};

template <class T>
bool dense_plane(const TensorView<T, 4>& t) {
    return t.stride(3) == 1 && t.stride(2) == t.w();
}

// What the flattened-plane kernels (conv2d_depthwise_flat.hpp, conv2d_dense_flat.hpp) need: a 3x3, stride
// 1, padding 1, undilated convolution (output planes the size of the input's) from a planar input to a
// planar output, the input, the output and every operand of the chain on gap-free planes.
template <class Plan, class Chain>
bool same_3x3_on_dense_planes(const Plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                              const Chain& chain) {
    if (P.kh != 3 || P.kw != 3 || P.sh != 1 || P.sw != 1 || P.dh != 1 || P.dw != 1 || P.pt != 1 || P.pl != 1)
        return false;
    if (out.h() != in.h() || out.w() != in.w() || in.stride(1) == 1 || !dense_plane(in) || !dense_plane(out))
        return false;
    for (const auto& operand : chain.operands())
        if (!dense_plane(operand)) return false;
    return true;
}

template <class Arch, class Chain>
bool pointwise_planar_supports(const pointwise_planar_plan& P, const TensorView<const float, 4>& in,
                               const TensorView<float, 4>& out, const Chain& chain) {
    using T = pointwise_planar_tile<Arch>;
    if (in.stride(1) == 1 || !dense_plane(out) || P.nr % T::mr != 0) return false;
    for (const auto& operand : chain.operands())
        if (!dense_plane(operand)) return false;
    const bool in_place = P.stride_h == 1 && P.stride_w == 1 && dense_plane(in);
    return in_place || P.cin * T::chunk <= band_capacity_floats;
}

// acc[i][v] += w[k][i] * x[k][v] for k < K: x advances by xs floats per input channel, w by ws. With
// `MaskLast`, the last vector loads only `last_lanes` pixels (the tail of a plane read in place).
template <class Arch, int MR, int NV, bool MaskLast>
OPFUSE_ALWAYS_INLINE void accumulate_pixel_lanes(accumulators<Arch, MR, NV>& acc, const float* x, index_t xs,
                                                 const float* w, index_t ws, index_t K, int last_lanes) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    for (index_t k = 0; k < K; ++k, x += xs, w += ws) {
        B xv[NV];
        static_for<NV>([&](auto v) OPFUSE_UNROLLED {
            if constexpr (MaskLast && v == NV - 1)
                xv[v] = load_channels<Arch>(x + v * S, 1, last_lanes);
            else
                xv[v] = B::load_unaligned(x + v * S);
        });
        static_for<MR>([&](auto i) OPFUSE_UNROLLED {
            const B a(w[i]);
            static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] = xsimd::fma(a, xv[v], acc[i][v]); });
        });
    }
}

// All channel tiles of one chunk of `pixels` (<= chunk) output pixels starting at pixel p0 of image n.
// x: the chunk's pixels of input channel 0, xs floats apart per input channel.
template <class Arch, int NV, bool MaskLast, class Chain>
OPFUSE_TILE_FUNCTION void pointwise_planar_chunk(const pointwise_planar_plan& P, const float* x, index_t xs,
                                                 const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                                 index_t p0, index_t pixels) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size), MR = pointwise_planar_tile<Arch>::mr;
    int lanes[NV];
    Site sites[NV];
    for (int v = 0; v < NV; ++v) {
        const index_t p = p0 + v * S;
        lanes[v] = int(std::clamp<index_t>(pixels - v * S, 0, S));
        sites[v] = Site{n, p / out.w(), p % out.w(), 0, lanes[v], true};
    }
    float* const plane0 = out.data() + n * out.stride(0) + p0;
    for (index_t co0 = 0; co0 < P.cout; co0 += MR) {
        accumulators<Arch, MR, NV> acc;
        zero(acc);
        const float* w = P.weights + (co0 / P.nr * P.cin) * P.nr + co0 % P.nr;
        accumulate_pixel_lanes<Arch, MR, NV, MaskLast>(acc, x, xs, w, P.nr, P.cin, lanes[NV - 1]);
        const int rows = int(std::min<index_t>(MR, P.cout - co0));
        auto finish = [&](int i, int v, B a) OPFUSE_UNROLLED {
            if (i >= rows || lanes[v] <= 0) return;
            Site s = sites[v];
            s.channel = co0 + i;
            const B y = chain(a + B(P.bias[co0 + i]), s);
            store_channels<Arch>(plane0 + (co0 + i) * out.stride(1) + v * S, 1, lanes[v], y);
        };
        for_each_accumulator<Arch, MR, NV, Chain::all_cheap>(acc, finish);
    }
}

// Runs a chunk with the smallest NV that covers its pixels.
template <class Arch, bool MaskLast, class Chain>
void pointwise_planar_dispatch(const pointwise_planar_plan& P, const float* x, index_t xs,
                               const TensorView<float, 4>& out, const Chain& chain, index_t n, index_t p0,
                               index_t pixels) {
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    static_assert(pointwise_planar_tile<Arch>::nv == 3, "the dispatch below covers NV = 1..3");
    if (pixels > 2 * S)
        pointwise_planar_chunk<Arch, 3, MaskLast>(P, x, xs, out, chain, n, p0, pixels);
    else if (pixels > S)
        pointwise_planar_chunk<Arch, 2, MaskLast>(P, x, xs, out, chain, n, p0, pixels);
    else
        pointwise_planar_chunk<Arch, 1, MaskLast>(P, x, xs, out, chain, n, p0, pixels);
}

// dst[j] = src[j * step] for j < len; the step is SW when known at compile time, else sw (SW = 0).
template <index_t SW>
OPFUSE_ALWAYS_INLINE void gather_segment(const float* src, index_t sw, float* dst, index_t len) {
    const index_t step = SW ? SW : sw;
    for (index_t j = 0; j < len; ++j) dst[j] = src[j * step];
}

// Gathers the inputs of output pixels [p0, p0 + count) of one image into panel[Cin][CH], zero past
// `count`, one output-row segment at a time so the reads run along input rows (a compile-time stride of
// 1 or 2 lets the compiler vectorize them).
template <index_t CH>
void gather_pixels_into(const pointwise_planar_plan& P, const TensorView<const float, 4>& in, const float* image,
                        index_t OW, index_t p0, index_t count, float* panel) {
    struct segment {
        index_t offset, first, len;  // input offset of the segment's first pixel, its first panel column, length
    };
    segment seg[CH];
    index_t segments = 0;
    for (index_t j = 0; j < count;) {
        const index_t p = p0 + j, oh = p / OW, ow = p % OW, len = std::min(count - j, OW - ow);
        seg[segments++] = {oh * P.stride_h * in.stride(2) + ow * P.stride_w * in.stride(3), j, len};
        j += len;
    }
    const index_t sw = P.stride_w * in.stride(3);
    for (index_t ci = 0; ci < P.cin; ++ci) {
        const float* src = image + ci * in.stride(1);
        float* dst = panel + ci * CH;
        for (index_t s = 0; s < segments; ++s) {
            const segment& g = seg[s];
            if (sw == 1)
                gather_segment<1>(src + g.offset, sw, dst + g.first, g.len);
            else if (sw == 2)
                gather_segment<2>(src + g.offset, sw, dst + g.first, g.len);
            else
                gather_segment<0>(src + g.offset, sw, dst + g.first, g.len);
        }
        std::fill(dst + count, dst + CH, 0.f);
    }
}

// A task is one chunk of pixels of one image.
template <class Arch, class Chain, class Exec>
void pointwise_planar(const pointwise_planar_plan& P, const TensorView<const float, 4>& in,
                      const TensorView<float, 4>& out, const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the planar 1x1 kernel needs epilogues that accept along_width Sites");
    constexpr index_t CH = pointwise_planar_tile<Arch>::chunk;
    const index_t pixels = out.h() * out.w(), chunks = (pixels + CH - 1) / CH;
    const bool in_place = P.stride_h == 1 && P.stride_w == 1 && dense_plane(in);
    exec.parallel_for(out.n() * chunks, [&](index_t t) {
        const index_t n = t / chunks, p0 = t % chunks * CH, count = std::min(CH, pixels - p0);
        const float* image = in.data() + n * in.stride(0);
        if (in_place) {
            if (count == CH)
                pointwise_planar_chunk<Arch, pointwise_planar_tile<Arch>::nv, false>(P, image + p0, in.stride(1), out,
                                                                                    chain, n, p0, count);
            else
                pointwise_planar_dispatch<Arch, true>(P, image + p0, in.stride(1), out, chain, n, p0, count);
            return;
        }
        alignas(64) float panel[band_capacity_floats];
        gather_pixels_into<CH>(P, in, image, out.w(), p0, count, panel);
        pointwise_planar_dispatch<Arch, false>(P, panel, CH, out, chain, n, p0, count);
    });
}

}  // namespace opfuse::detail
