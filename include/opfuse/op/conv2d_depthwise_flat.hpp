// 3x3 depthwise convolution, stride 1, padding 1 ("same"), on dense planar (NCHW) tensors, vectorized
// along the flattened plane: a vector holds 16 consecutive pixels of one channel in row-major order, and
// may run from the end of one row into the next. AVX-512 only (masked loads and valignd).
//
// Why: on small planes the row-by-row planar kernel (conv2d_depthwise_planar.hpp) pays per output row
// for a ring copy, a partial last vector and its bookkeeping (a 56-pixel row is 3.5 vectors); on the
// flattened plane a 56x56 channel is 196 full vectors and no copy. With H*W pixels numbered p = y*W + x,
// the taps of row kh read p + (kh-1)*W, and a tap outside the plane (top/bottom padding) is exactly a
// flattened index outside [0, H*W): the loads of the first and last vectors are masked, nothing else is.
// Per input position the three kernel columns' sums over the kernel rows are computed once (9 FMAs on 3
// loads); the output is
//     T1[p] + T0[p-1] (unless x == 0) + T2[p+1] (unless x == W-1),
// the left/right padding being those two lane masks, the shifts by one lane valignd with the previous and
// next vector's sums.
//
// The output plane and every operand plane of the chain must have gap-free rows (an along_width Site whose
// lanes continue into the next row); checked by depthwise_flat_supports.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../epilogue/site.hpp"
#include "../kernel/vector_io.hpp"
#include "conv2d_depthwise.hpp"
#include "conv2d_pointwise_planar.hpp"

namespace opfuse::detail {

template <class Arch, class Chain>
bool depthwise_flat_supports(const depthwise_plan& P, const TensorView<const float, 4>& in,
                             const TensorView<float, 4>& out, const Chain& chain) {
    if constexpr (!has_masked_moves<Arch>) {
        return false;
    } else {
        return same_3x3_on_dense_planes(P, in, out, chain);
    }
}

#if XSIMD_WITH_AVX512F
// Output vectors [v0, v1) of the plane of channel c of image n.
template <class Arch, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_flat_vectors(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                                 const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                                 index_t c, index_t v0, index_t v1) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = 16;
    const index_t W = in.w(), HW = in.h() * W;
    const float* x = in.data() + n * in.stride(0) + c * in.stride(1);
    const index_t oc = P.channel_base + c;
    float* y = out.data() + n * out.stride(0) + oc * out.stride(1);

    B w[3][3];
    for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) w[kh][kw] = B(P.weights[((c / S) * 9 + kh * 3 + kw) * S + c % S]);
    const B bias(P.bias[c]);

    // 16 floats from flattened index i; indices outside the plane read as zero (masked, never touched).
    auto load = [&](index_t i) OPFUSE_UNROLLED -> B {
        if (i >= 0 && i + S <= HW) return B::load_unaligned(x + i);
        const index_t lo = std::max<index_t>(0, -i), hi = std::min<index_t>(S, HW - i);
        if (lo >= hi) return B(0.f);
        const __mmask16 m = __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
        // The address may lie before the plane (first vectors): formed as an integer, never dereferenced
        // outside the mask.
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(x) + i * sizeof(float)));
    };
    auto column_sums = [&](index_t q, B (&t)[3]) OPFUSE_UNROLLED {
        const B a0 = load(q - W), a1 = load(q), a2 = load(q + W);
        for (int kw = 0; kw < 3; ++kw) t[kw] = xsimd::fma(a2, w[2][kw], xsimd::fma(a1, w[1][kw], a0 * w[0][kw]));
    };

    // Column of each lane of the current vector, stepped by 16 mod W per vector (one conditional wrap).
    const __m512i width = _mm512_set1_epi32(int(W)), last_col = _mm512_set1_epi32(int(W - 1));
    const __m512i step = _mm512_set1_epi32(int(S % W));
    alignas(64) int cols[S];
    index_t q = v0 * S, row = q / W, col = q % W;
    for (index_t l = 0, cx = col; l < S; ++l, cx = cx + 1 == W ? 0 : cx + 1) cols[l] = int(cx);
    __m512i colv = _mm512_load_si512(cols);

    B prev[3], cur[3], next[3];
    column_sums(q - S, prev);
    column_sums(q, cur);
    for (index_t v = v0; v < v1; ++v, q += S) {
        column_sums(q + S, next);
        const __mmask16 has_left = _mm512_cmpneq_epi32_mask(colv, _mm512_setzero_si512());
        const __mmask16 has_right = _mm512_cmpneq_epi32_mask(colv, last_col);
        const __m512 left = _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(cur[0]), _mm512_castps_si512(prev[0]), 15));
        const __m512 right = _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(next[2]), _mm512_castps_si512(cur[2]), 1));
        __m512 acc = _mm512_add_ps(cur[1], bias);
        acc = _mm512_mask_add_ps(acc, has_left, acc, left);
        acc = _mm512_mask_add_ps(acc, has_right, acc, right);
        const int lanes = int(std::min<index_t>(S, HW - q));
        const B r = chain(B(acc), Site{n, row, col, oc, lanes, true});
        store_channels<Arch>(y + q, 1, lanes, r);

        colv = _mm512_add_epi32(colv, step);
        colv = _mm512_mask_sub_epi32(colv, _mm512_cmpge_epi32_mask(colv, width), colv, width);
        for (col += S; col >= W; col -= W) ++row;
        for (int k = 0; k < 3; ++k) prev[k] = cur[k], cur[k] = next[k];
    }
}

template <class Arch, class Chain, class Exec>
void depthwise_flat(const depthwise_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                    const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the flattened depthwise kernel needs epilogues that accept along_width Sites");
    constexpr index_t S = 16;
    const index_t vectors = (in.h() * in.w() + S - 1) / S;
    for_each_plane_part(out.n(), P.channels, vectors, std::min<index_t>(vectors, 8), exec,
                        [&](index_t n, index_t c, index_t v0, index_t v1) {
                            depthwise_flat_vectors<Arch>(P, in, out, chain, n, c, v0, v1);
                        });
}
#endif

}  // namespace opfuse::detail
