// Depthwise convolution on planar tensors (NCHW: each channel a plane with contiguous rows), vectorized
// along the output row: a vector holds S consecutive output pixels of one channel, and each tap is one
// broadcast weight times one unaligned load of S consecutive input pixels. Nothing is transposed, where
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
           P.kw <= planar_max_taps && ring <= planar_max_ring && ring * planar_row_floats<Arch>(P, in.w(), out.w()) <= band_capacity_floats;
}

// Output rows [y0, y1) of channel c of image n.
template <class Arch, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_planar_rows(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                                const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                                index_t c, index_t y0, index_t y1) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size), V = planar_vectors;
    const index_t H = in.h(), W = in.w(), OW = out.w(), KH = P.kh, KW = P.kw, taps = KH * KW;
    const index_t ring = (KH - 1) * P.dh + 1, L = planar_row_floats<Arch>(P, W, OW);
    const float* plane = in.data() + n * in.stride(0) + c * in.stride(1);

    alignas(64) float rows[band_capacity_floats];
    std::fill(rows, rows + ring * L, 0.f);  // the padding columns stay zero: only [pl, pl + W) is written
    index_t held[planar_max_ring];  // input row in each ring slot (-1: none yet)
    std::fill(held, held + ring, index_t(-1));

    float w[planar_max_taps * planar_max_taps];
    for (index_t t = 0; t < taps; ++t) w[t] = P.weights[((c / S) * taps + t) * S + c % S];
    const B bias(P.bias[c]);
    const index_t oc = P.channel_base + c;

    for (index_t y = y0; y < y1; ++y) {
        const float* src[planar_max_taps];  // padded input row of kernel row kh, or null in the padding
        for (index_t kh = 0; kh < KH; ++kh) {
            const index_t ih = y * P.sh - P.pt + kh * P.dh;
            if (ih < 0 || ih >= H) {
                src[kh] = nullptr;
                continue;
            }
            float* slot = rows + (ih % ring) * L;
            if (held[ih % ring] != ih) {
                std::memcpy(slot + P.pl, plane + ih * in.stride(2), sizeof(float) * static_cast<std::size_t>(W));
                held[ih % ring] = ih;
            }
            src[kh] = slot;
        }
        float* dst = out.data() + out.offset(n, oc, y, 0);
        for (index_t x0 = 0; x0 < OW; x0 += V * S) {
            B acc[V];
            static_for<V>([&](auto i) OPFUSE_UNROLLED { acc[i] = B(0.f); });
            for (index_t kh = 0; kh < KH; ++kh) {
                if (!src[kh]) continue;
                const float* r = src[kh] + x0;
                for (index_t kw = 0; kw < KW; ++kw) {
                    const B wv(w[kh * KW + kw]);
                    static_for<V>([&](auto i) OPFUSE_UNROLLED {
                        acc[i] = xsimd::fma(B::load_unaligned(r + i * S + kw), wv, acc[i]);
                    });
                }
            }
            static_for<V>([&](auto i) OPFUSE_UNROLLED {
                const index_t x = x0 + i * S;
                if (x >= OW) return;
                const int lanes = int(std::min<index_t>(S, OW - x));
                const B v = chain(acc[i] + bias, Site{n, y, x, oc, lanes, true});
                store_channels<Arch>(dst + x, 1, lanes, v);
            });
        }
    }
}

// A task is one channel plane of one image (or a chunk of its rows when there are few planes).
template <class Arch, class Chain, class Exec>
void depthwise_planar(const depthwise_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                      const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the planar depthwise kernel needs epilogues that accept along_width Sites");
    const index_t N = out.n(), OH = out.h(), planes = N * P.channels;
    const index_t chunks = planes >= 4 * index_t(exec.num_threads()) ? 1 : (OH + band_chunk_rows - 1) / band_chunk_rows;
    const index_t rows_per_chunk = (OH + chunks - 1) / chunks;
    exec.parallel_for(planes * chunks, [&](index_t t) {
        const index_t k = t % chunks, c = (t / chunks) % P.channels, n = t / chunks / P.channels;
        const index_t y0 = k * rows_per_chunk, y1 = std::min(OH, y0 + rows_per_chunk);
        if (y0 < y1) depthwise_planar_rows<Arch>(P, in, out, chain, n, c, y0, y1);
    });
}

}  // namespace opfuse::detail
