// Depthwise convolution on planar tensors (NCHW: each channel a plane with contiguous rows), vectorized
// along the output row: a vector holds S consecutive output pixels of one channel, and each tap is one
// broadcast weight times one load of S consecutive input pixels (3x3 on AVX-512: per-column sums of
// aligned loads, shifted into place; see below). Nothing is transposed, where
// the channel-vectorized kernel (conv2d_depthwise.hpp) needs every input and output value moved through
// an NHWC band.
//
// The input rows a task reads are copied once each into a small ring of zero-padded rows on the stack,
// so the left/right padding and the row tails need no branch or masked load. The epilogue runs on each
// output vector with an `along_width` Site (site.hpp), so only chains whose epilogues accept that
// (`pixel_lanes`: all built-ins) come here.
#pragma once

#include <algorithm>
#include <cstring>

#include "../core/static_for.hpp"
#include "../kernel/nhwc_band.hpp"
#include "../kernel/vector_io.hpp"
#include "../epilogue/site.hpp"
#include "conv2d_depthwise.hpp"

namespace opfuse::detail {

// Output vectors computed together along a row: independent FMA chains to cover the FMA latency.
inline constexpr int planar_vectors = 4;
inline constexpr index_t planar_max_taps = 7;   // kernel height and width
inline constexpr index_t planar_max_ring = 32;  // input rows one output row spans: (kh - 1) * dh + 1

// Floats of one padded row: the input row at offset pl, zeros around it, long enough for every load of
// the last group of vectors (its lanes past the row are computed and never stored).
template <class Arch>
index_t planar_row_floats(const depthwise_plan& P, index_t W, index_t OW) {
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size), group = planar_vectors * S;
    const index_t reach = (OW + group - 1) / group * group + P.kw;
    return (std::max(reach, P.pl + W) + S - 1) / S * S;
}

template <class Arch>
bool depthwise_planar_supports(const depthwise_plan& P, const TensorView<const float, 4>& in,
                               const TensorView<float, 4>& out) {
    const index_t ring = (P.kh - 1) * P.dh + 1;
    return in.stride(3) == 1 && out.stride(3) == 1 && P.sw == 1 && P.dw == 1 && P.kh <= planar_max_taps &&
           P.kw <= planar_max_taps && ring <= planar_max_ring && (ring + 1) * planar_row_floats<Arch>(P, in.w(), out.w()) <= band_capacity_floats;
}

// Output rows [y0, y1) of channel c of image n. `KWC`: the kernel width when known at compile time (then
// the tap loop is unrolled and the row's weights stay in registers), 0 otherwise.
template <class Arch, int KWC, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_planar_rows(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                                const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                                index_t c, index_t y0, index_t y1) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size), V = planar_vectors;
    const index_t H = in.h(), W = in.w(), OW = out.w(), KH = P.kh, KW = KWC ? KWC : P.kw, taps = KH * KW;
    const index_t ring = (KH - 1) * P.dh + 1, L = planar_row_floats<Arch>(P, W, OW);
    const float* plane = in.data() + n * in.stride(0) + c * in.stride(1);

    alignas(64) float rows[band_capacity_floats];
    // The padding columns stay zero: only [pl, pl + W) is written. One more row stays all zero: the 3x3
    // path reads it for kernel rows in the vertical padding.
    std::fill(rows, rows + (ring + 1) * L, 0.f);
    [[maybe_unused]] const float* zero_row = rows + ring * L;
    index_t held[planar_max_ring];  // input row in each ring slot (-1: none yet)
    std::fill(held, held + ring, index_t(-1));

    float w[planar_max_taps * planar_max_taps];
    for (index_t t = 0; t < taps; ++t) w[t] = P.weights[((c / S) * taps + t) * S + c % S];
    const B bias(P.bias[c]);
    const index_t oc = P.channel_base + c;

    // Ring slot of input row ih is ih % ring, tracked by additions (a division per kernel row per output
    // row was a tenth of the time on 56-pixel rows).
    auto wrap = [ring](index_t s) { return s >= ring ? s - ring : s; };
    index_t slot0 = (y0 * P.sh - P.pt) % ring;
    if (slot0 < 0) slot0 += ring;
    const index_t sh_step = P.sh % ring, dh_step = P.dh % ring;
    for (index_t y = y0; y < y1; ++y, slot0 = wrap(slot0 + sh_step)) {
        const float* src[planar_max_taps];  // padded input row of kernel row kh, or null in the padding
        for (index_t kh = 0, slot = slot0; kh < KH; ++kh, slot = wrap(slot + dh_step)) {
            const index_t ih = y * P.sh - P.pt + kh * P.dh;
            src[kh] = nullptr;
            if (ih < 0 || ih >= H) continue;
            float* row = rows + slot * L;
            if (held[slot] != ih) {
                const float* from = plane + ih * in.stride(2);
                copy_floats<Arch>(from, row + P.pl, W);
                held[slot] = ih;
            }
            src[kh] = row;
        }
        float* dst = out.data() + out.offset(n, oc, y, 0);
        auto finish = [&](index_t x, B acc) OPFUSE_UNROLLED {
            if (x >= OW) return;
            const int lanes = int(std::min<index_t>(S, OW - x));
            const B v = chain(acc + bias, Site{n, y, x, oc, lanes, true});
            store_channels<Arch>(dst + x, 1, lanes, v);
        };
#if XSIMD_WITH_AVX512F
        // 3x3: per input vector, the three kernel columns' sums over the kernel rows (9 FMAs on aligned
        // loads); the output vector is column 0's sum plus columns 1 and 2 shifted in from the next
        // vector's sums by valignd: 2 shuffles per output vector where shifting the inputs took 6. Only
        // lanes 14 and 15 read the next vector's sums, so the row's last vector often needs none: a
        // 56-pixel row is 4 vectors of sums, not 5 (in groups of 4 vectors it had been 5 of 9 FMAs each).
        if constexpr (KWC == 3 && has_masked_moves<Arch>) {
            if (KH == 3) {
                const float* r[3];
                B wv[3][3];
                for (int kh = 0; kh < 3; ++kh) r[kh] = src[kh] ? src[kh] : zero_row;
                static_for<3>([&](auto kh) OPFUSE_UNROLLED {
                    static_for<3>([&](auto kw) OPFUSE_UNROLLED { wv[kh][kw] = B(w[kh * 3 + kw]); });
                });
                auto column_sums = [&](index_t x, B (&t)[3]) OPFUSE_UNROLLED {
                    const B a0 = B::load_aligned(r[0] + x), a1 = B::load_aligned(r[1] + x), a2 = B::load_aligned(r[2] + x);
                    static_for<3>([&](auto kw) OPFUSE_UNROLLED {
                        t[kw] = xsimd::fma(a2, wv[2][kw], xsimd::fma(a1, wv[1][kw], a0 * wv[0][kw]));
                    });
                };
                auto output = [&](index_t x, const B (&t)[3], const B (&next)[3]) OPFUSE_UNROLLED {
                    const __m512i lo1 = _mm512_castps_si512(t[1]), hi1 = _mm512_castps_si512(next[1]);
                    const __m512i lo2 = _mm512_castps_si512(t[2]), hi2 = _mm512_castps_si512(next[2]);
                    finish(x, t[0] + B(_mm512_castsi512_ps(_mm512_alignr_epi32(hi1, lo1, 1))) +
                                  B(_mm512_castsi512_ps(_mm512_alignr_epi32(hi2, lo2, 2))));
                };
                B t[V + 1][3];
                column_sums(0, t[0]);
                index_t x0 = 0;
                // groups of V output vectors whose last one needs the next vector's sums (lane 14 < OW)
                for (; x0 + V * S - 2 < OW; x0 += V * S) {
                    static_for<V>([&](auto i) OPFUSE_UNROLLED { column_sums(x0 + (i + 1) * S, t[i + 1]); });
                    static_for<V>([&](auto i) OPFUSE_UNROLLED { output(x0 + i * S, t[i], t[i + 1]); });
                    static_for<3>([&](auto kw) OPFUSE_UNROLLED { t[0][kw] = t[V][kw]; });
                }
                // the rest one vector at a time; the next vector's sums only where lane 14 is a pixel
                for (; x0 < OW; x0 += S) {
                    B next[3] = {B(0.f), B(0.f), B(0.f)};
                    if (x0 + S - 2 < OW) column_sums(x0 + S, next);
                    output(x0, t[0], next);
                    static_for<3>([&](auto kw) OPFUSE_UNROLLED { t[0][kw] = next[kw]; });
                }
                continue;
            }
        }
#endif
        for (index_t x0 = 0; x0 < OW; x0 += V * S) {
            B acc[V];
            static_for<V>([&](auto i) OPFUSE_UNROLLED { acc[i] = B(0.f); });
            for (index_t kh = 0; kh < KH; ++kh) {
                if (!src[kh]) continue;
                const float* r = src[kh] + x0;
                auto tap = [&](index_t kw) OPFUSE_UNROLLED {
                    const B wv(w[kh * KW + kw]);
                    static_for<V>([&](auto i) OPFUSE_UNROLLED {
                        acc[i] = xsimd::fma(B::load_unaligned(r + i * S + kw), wv, acc[i]);
                    });
                };
                if constexpr (KWC != 0)
                    static_for<KWC>([&](auto kw) OPFUSE_UNROLLED { tap(kw); });
                else
                    for (index_t kw = 0; kw < KW; ++kw) tap(kw);
            }
            static_for<V>([&](auto i) OPFUSE_UNROLLED { finish(x0 + i * S, acc[i]); });
        }
    }
}

template <class Arch, class Chain, class Exec>
void depthwise_planar(const depthwise_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                      const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the planar depthwise kernel needs epilogues that accept along_width Sites");
    const index_t OH = out.h();
    for_each_plane_part(out.n(), P.channels, OH, (OH + band_chunk_rows - 1) / band_chunk_rows, exec,
                        [&](index_t n, index_t c, index_t y0, index_t y1) {
                            if (P.kw == 3)
                                depthwise_planar_rows<Arch, 3>(P, in, out, chain, n, c, y0, y1);
                            else
                                depthwise_planar_rows<Arch, 0>(P, in, out, chain, n, c, y0, y1);
                        });
}

}  // namespace opfuse::detail
