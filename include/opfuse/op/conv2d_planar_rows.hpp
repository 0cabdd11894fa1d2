// Convolutions with a short reduction (the first layer: 3 input channels x 3x3) on planar (NCHW) tensors,
// vectorized along the output row: a register tile is MR output channels x NV vectors of consecutive
// pixels of one output row, and each step of the reduction (input channel, kernel row, kernel column)
// loads NV vectors of one padded input row and broadcasts MR weights. Nothing is transposed, where the
// band path moves every input and output value through an NHWC band (measured: 1.4x the NHWC time on
// 3->64 @224, most of it the output transpose).
//
// The input rows a task reads are copied once each into a ring of zero-padded rows on the stack (as in
// conv2d_depthwise_planar.hpp), so padding and row tails need no branch or masked load; taps whose row
// lies in the vertical padding are skipped. Weights are the conv's packed [block][kh][kw][Cin][NR]
// panels: MR consecutive lanes of a block are the tile's MR channels, read in the order of the loop.
#pragma once

#include <algorithm>

#include "../core/static_for.hpp"
#include "../epilogue/site.hpp"
#include "../kernel/epilogue_tile.hpp"
#include "../kernel/gemm_tile.hpp"
#include "../kernel/nhwc_band.hpp"
#include "../kernel/stream_store.hpp"
#include "../kernel/vector_io.hpp"
#include "conv2d_pointwise_planar.hpp"

namespace opfuse::detail {

struct planar_rows_plan {
    index_t cin, cout, kh, kw, sh, pt, pl, dh, dw;
    index_t nr;            // lanes of a packed weight block
    const float* weights;  // [block][kh][kw][cin][nr], zero-padded past cout
    const float* bias;     // zero-padded past cout
    bool stream;           // write the output with streaming stores (stream_store.hpp)
};

inline constexpr index_t planar_rows_max_ring = 32;  // input rows one output row spans: (kh - 1) * dh + 1
inline constexpr index_t planar_rows_max_kh = 7;

template <class Arch>
index_t planar_rows_floats(const planar_rows_plan& P, index_t W, index_t OW) {
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    const index_t reach = (OW + S - 1) / S * S + (P.kw - 1) * P.dw;  // the last vector's lanes past OW included
    return (std::max(reach, P.pl + W) + S - 1) / S * S;
}

// Planar in and out, stride 1 along the rows, a reduction short enough that a tile's loads are few
// (short_reduction, as for the band path) and rows wide enough to fill two vectors.
template <class Arch>
bool planar_rows_supports(const planar_rows_plan& P, const TensorView<const float, 4>& in,
                          const TensorView<float, 4>& out) {
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    const index_t ring = (P.kh - 1) * P.dh + 1;
    return in.stride(1) != 1 && in.stride(3) == 1 && out.stride(1) != 1 && out.stride(3) == 1 &&
           short_reduction(P.kw, P.cin) && out.w() >= 2 * S && P.nr % pointwise_planar_tile<Arch>::mr == 0 &&
           P.kh <= planar_rows_max_kh && ring <= planar_rows_max_ring && P.cin * ring * planar_rows_floats<Arch>(P, in.w(), out.w()) <= band_capacity_floats;
}

// One tile: channels [co0, co0 + MR) x pixels [x0, x0 + NV * S) of output row y. src[kh][ci]: the
// padded input row of kernel row kh and channel ci (null in the vertical padding), offset to x0.
template <class Arch, int NV, class Chain>
OPFUSE_ALWAYS_INLINE void planar_rows_tile(const planar_rows_plan& P, const float* const* src, float* dst,
                                           index_t plane, const Chain& chain, index_t n, index_t y, index_t x0,
                                           index_t OW, index_t co0) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size), MR = pointwise_planar_tile<Arch>::mr;
    accumulators<Arch, MR, NV> acc;
    zero(acc);
    const float* w = P.weights + (co0 / P.nr * P.kh * P.kw * P.cin) * P.nr + co0 % P.nr;
    const index_t row_step = P.kw * P.cin * P.nr;
    for (index_t kh = 0; kh < P.kh; ++kh, w += row_step) {
        const float* const* rows = src + kh * P.cin;
        if (!rows[0]) continue;
        const float* wk = w;
        for (index_t kw = 0; kw < P.kw; ++kw)
            for (index_t ci = 0; ci < P.cin; ++ci, wk += P.nr) {
                const float* x = rows[ci] + kw * P.dw;
                B xv[NV];
                static_for<NV>([&](auto v) OPFUSE_UNROLLED { xv[v] = B::load_unaligned(x + v * S); });
                static_for<MR>([&](auto i) OPFUSE_UNROLLED {
                    const B a(wk[i]);
                    static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] = xsimd::fma(a, xv[v], acc[i][v]); });
                });
            }
    }
    const int rows_left = int(std::min<index_t>(MR, P.cout - co0));
    auto finish = [&](int i, int v, B a) OPFUSE_UNROLLED {
        const index_t x = x0 + v * S;
        if (i >= rows_left || x >= OW) return;
        const int lanes = int(std::min<index_t>(S, OW - x));
        const B out = chain(a + B(P.bias[co0 + i]), Site{n, y, x, co0 + i, lanes, true});
        float* p = dst + (co0 + i) * plane + x;
        if (P.stream && lanes == S)
            stream_store<Arch>(p, out);
        else
            store_channels<Arch>(p, 1, lanes, out);
    };
    for_each_accumulator<Arch, MR, NV, Chain::all_cheap>(acc, finish);
}

// Output rows [y0, y1) of image n.
template <class Arch, class Chain>
OPFUSE_TILE_FUNCTION void planar_rows_run(const planar_rows_plan& P, const TensorView<const float, 4>& in,
                                          const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                          index_t y0, index_t y1) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = index_t(B::size), MR = pointwise_planar_tile<Arch>::mr;
    constexpr int NV = pointwise_planar_tile<Arch>::nv;
    const index_t H = in.h(), W = in.w(), OW = out.w(), KH = P.kh, C = P.cin;
    const index_t ring = (KH - 1) * P.dh + 1, L = planar_rows_floats<Arch>(P, W, OW);

    alignas(64) float rows[band_capacity_floats];  // [ci][slot][L]
    std::fill(rows, rows + C * ring * L, 0.f);     // the padding columns stay zero: only [pl, pl + W) is written
    index_t held[planar_rows_max_ring];             // input row in each ring slot (-1: none yet)
    std::fill(held, held + ring, index_t(-1));
    const float* src[planar_rows_max_kh * 32];  // [kh][ci] row pointers of one output row (cin < 32)
    const float* at[planar_rows_max_kh * 32];   // the same, offset to a tile's first pixel

    for (index_t y = y0; y < y1; ++y) {
        for (index_t kh = 0; kh < KH; ++kh) {
            const index_t ih = y * P.sh - P.pt + kh * P.dh;
            const bool inside = ih >= 0 && ih < H;
            const index_t slot = inside ? ih % ring : 0;
            if (inside && held[slot] != ih) {
                for (index_t ci = 0; ci < C; ++ci) {
                    const float* from = in.data() + in.offset(n, ci, ih, 0);
                    copy_floats<Arch>(from, rows + (ci * ring + slot) * L + P.pl, W);
                }
                held[slot] = ih;
            }
            for (index_t ci = 0; ci < C; ++ci) src[kh * C + ci] = inside ? rows + (ci * ring + slot) * L : nullptr;
        }
        float* dst = out.data() + out.offset(n, 0, y, 0);
        for (index_t x0 = 0; x0 < OW; x0 += NV * S) {
            for (index_t r = 0; r < KH * C; ++r) at[r] = src[r] ? src[r] + x0 : nullptr;
            const index_t left = OW - x0;
            for (index_t co0 = 0; co0 < P.cout; co0 += MR) {
                if (left > 2 * S)
                    planar_rows_tile<Arch, NV>(P, at, dst, out.stride(1), chain, n, y, x0, OW, co0);
                else if (left > S)
                    planar_rows_tile<Arch, 2>(P, at, dst, out.stride(1), chain, n, y, x0, OW, co0);
                else
                    planar_rows_tile<Arch, 1>(P, at, dst, out.stride(1), chain, n, y, x0, OW, co0);
            }
        }
    }
    if (P.stream) stream_fence();
}

// A task is a chunk of output rows of one image.
template <class Arch, class Chain, class Exec>
void planar_rows(const planar_rows_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                 const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the planar row kernel needs epilogues that accept along_width Sites");
    static_assert(pointwise_planar_tile<Arch>::nv == 3, "planar_rows_run dispatches NV = 1..3");
    const index_t OH = out.h(), chunks = (OH + band_chunk_rows - 1) / band_chunk_rows;
    exec.parallel_for(out.n() * chunks, [&](index_t t) {
        const index_t n = t / chunks, y0 = t % chunks * band_chunk_rows;
        planar_rows_run<Arch>(P, in, out, chain, n, y0, std::min(OH, y0 + band_chunk_rows));
    });
}

}  // namespace opfuse::detail
