// 3x3 depthwise convolution, stride 1, left/right padding 1, on planar (NCHW) tensors, for AVX2 (8 lanes):
// a vector holds 8 consecutive output pixels of one row of one channel, and each of the 9 taps is one
// unaligned load of the input row, read in place, times a broadcast weight.
//
// Why not the generic planar kernel (conv2d_depthwise_planar.hpp): it copies every input row into a
// zero-padded ring on the stack and computes whole groups of 4 vectors, so a 112-pixel row costs a
// 112-float copy and 128 pixels of FMAs. Here only a row's first and last vectors (whose taps reach the
// left/right padding, or past the row's end) take masked loads; everything else is 9 loads and 9 FMAs
// per vector. The AVX-512 column-sum trick (conv2d_depthwise_flat.hpp) does not carry over: shifting a
// vector by one lane across the two 128-bit halves costs two shuffles on AVX2 (several micro-ops each on
// Zen 1), more than the two loads it saves.
//
// Rows in the top/bottom padding are skipped (not multiplied by zero weights), so an Inf or NaN in the
// input stays exactly as the reference convolution propagates it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../core/static_for.hpp"
#include "../epilogue/site.hpp"
#include "../kernel/nhwc_band.hpp"
#include "../kernel/vector_io.hpp"
#include "conv2d_depthwise.hpp"

namespace opfuse::detail {

template <class Arch>
inline constexpr bool has_avx2_masked_loads =
#if XSIMD_WITH_AVX2
    std::is_base_of_v<xsimd::avx2, Arch>;
#else
    false;
#endif

template <class Arch>
bool depthwise_rows3x3_supports(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                const TensorView<float, 4>& out) {
    if constexpr (!has_avx2_masked_loads<Arch>) {
        return false;
    } else {
        return P.kh == 3 && P.kw == 3 && P.sh == 1 && P.sw == 1 && P.dh == 1 && P.dw == 1 && P.pl == 1 &&
               out.w() == in.w() && in.stride(1) != 1 && in.stride(3) == 1 && out.stride(3) == 1 &&
               in.stride(0) >= 0 && in.stride(1) >= 0 && in.stride(2) >= 0;  // view_extent's assumption
    }
}

// Floats from data() to one past the view's last element (non-negative strides).
inline index_t view_extent(const TensorView<const float, 4>& t) {
    return (t.n() - 1) * t.stride(0) + (t.c() - 1) * t.stride(1) + (t.h() - 1) * t.stride(2) + t.w();
}

#if XSIMD_WITH_AVX2
// Lanes of the 8 columns from x that lie inside [0, W) (all bits set), for _mm256_maskload_ps.
OPFUSE_ALWAYS_INLINE __m256i row_window_mask(index_t x, index_t W) {
    const __m256i col = _mm256_add_epi32(_mm256_set1_epi32(int(x)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(int(W)), col));
}

// 8 floats of `row` from column x, lanes outside `inside` zero. A plain load masked by an AND where all 8
// floats lie inside [lo, hi) (the input view's extent): _mm256_maskload_ps costs ~150 cycles per vector on
// Zen 1 (measured: an edge vector took 50 ns against 4 ns for an interior one), so it is kept for the
// loads that would leave the view (column -1 of its first row, columns past the end of its last row).
OPFUSE_ALWAYS_INLINE __m256 load_row_window(const float* row, index_t x, __m256i inside, std::uintptr_t lo,
                                            std::uintptr_t hi) {
    // The address may lie outside the view: formed as an integer, dereferenced only inside it.
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(row) + std::uintptr_t(x) * sizeof(float);
    const auto* p = reinterpret_cast<const float*>(a);
    if (a >= lo && a + 8 * sizeof(float) <= hi) return _mm256_and_ps(_mm256_loadu_ps(p), _mm256_castsi256_ps(inside));
    return _mm256_maskload_ps(p, inside);
}

// Output rows [y0, y1) of channel c of image n.
template <class Arch, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_rows3x3(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                            const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                            index_t c, index_t y0, index_t y1) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = 8, V = 4;  // V: vectors in flight, independent FMA chains (latency 4-5 cycles)
    static_assert(index_t(B::size) == S, "AVX2: 8 lanes, the packed weights' channel vector");
    const index_t H = in.h(), W = in.w();
    const float* plane = in.data() + n * in.stride(0) + c * in.stride(1);
    const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(in.data()),
                         hi = reinterpret_cast<std::uintptr_t>(in.data() + view_extent(in));
    const index_t oc = P.channel_base + c;

    B w[3][3];
    for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) w[kh][kw] = B(P.weights[((c / S) * 9 + kh * 3 + kw) * S + c % S]);
    const B bias(P.bias[c]);

    // Vectors starting at x in [interior_begin, interior_end) read no column outside the row.
    const index_t interior_begin = std::min(W, S), interior_end = std::max(interior_begin, W - S);
    for (index_t y = y0; y < y1; ++y) {
        const index_t top = y - P.pt;  // input row of kernel row 0
        const index_t kh0 = std::max<index_t>(0, -top), kh1 = std::min<index_t>(3, H - top);
        const float* r[3];
        // Rows in the padding are never read; clamped only so that no pointer leaves the plane.
        for (index_t kh = 0; kh < 3; ++kh) r[kh] = plane + std::clamp<index_t>(top + kh, 0, H - 1) * in.stride(2);
        float* dst = out.data() + out.offset(n, oc, y, 0);
        // Interior vectors are whole (lanes = S known at compile time: a plain store); edge ones may not be.
        auto finish = [&](index_t x, B acc, int lanes) OPFUSE_UNROLLED {
            store_channels<Arch>(dst + x, 1, lanes, chain(acc + bias, Site{n, y, x, oc, lanes, true}));
        };
        // A vector whose taps reach outside the row: masked loads (3 masks, one per kernel column). `all_rows`:
        // kernel rows 0-2 (unrolled, the weights stay in registers), else kh0..kh1.
        auto edge_vector = [&](index_t x, auto all_rows) OPFUSE_UNROLLED {
            const __m256i inside[3] = {row_window_mask(x - 1, W), row_window_mask(x, W), row_window_mask(x + 1, W)};
            B acc(0.f);
            auto row = [&](index_t kh) OPFUSE_UNROLLED {
                static_for<3>([&](auto kw) OPFUSE_UNROLLED {
                    acc = xsimd::fma(B(load_row_window(r[kh], x + kw - 1, inside[kw], lo, hi)), w[kh][kw], acc);
                });
            };
            if constexpr (decltype(all_rows)::value)
                static_for<3>([&](auto kh) OPFUSE_UNROLLED { row(kh); });
            else
                for (index_t kh = kh0; kh < kh1; ++kh) row(kh);
            finish(x, acc, int(std::min<index_t>(S, W - x)));
        };
        if (kh0 != 0 || kh1 != 3) {  // kernel rows in the top/bottom padding: the first/last output rows
            edge_vector(0, std::false_type{});
            index_t x = interior_begin;
            for (; x < interior_end; x += S) {
                B acc(0.f);
                for (index_t kh = kh0; kh < kh1; ++kh)
                    static_for<3>([&](auto kw) OPFUSE_UNROLLED {
                        acc = xsimd::fma(B::load_unaligned(r[kh] + x + kw - 1), w[kh][kw], acc);
                    });
                finish(x, acc, int(S));
            }
            for (; x < W; x += S) edge_vector(x, std::false_type{});
            continue;
        }
        edge_vector(0, std::true_type{});
        index_t x = interior_begin;
        for (; x + (V - 1) * S < interior_end; x += V * S) {
            B acc[V];
            static_for<V>([&](auto i) OPFUSE_UNROLLED { acc[i] = B(0.f); });
            static_for<3>([&](auto kh) OPFUSE_UNROLLED {
                static_for<3>([&](auto kw) OPFUSE_UNROLLED {
                    static_for<V>([&](auto i) OPFUSE_UNROLLED {
                        acc[i] = xsimd::fma(B::load_unaligned(r[kh] + x + i * S + kw - 1), w[kh][kw], acc[i]);
                    });
                });
            });
            static_for<V>([&](auto i) OPFUSE_UNROLLED { finish(x + i * S, acc[i], int(S)); });
        }
        for (; x < interior_end; x += S) {
            B acc(0.f);
            static_for<3>([&](auto kh) OPFUSE_UNROLLED {
                static_for<3>([&](auto kw) OPFUSE_UNROLLED {
                    acc = xsimd::fma(B::load_unaligned(r[kh] + x + kw - 1), w[kh][kw], acc);
                });
            });
            finish(x, acc, int(S));
        }
        for (; x < W; x += S) edge_vector(x, std::true_type{});
    }
}

// A task is one channel plane of one image, or a chunk of its rows when there are few planes.
template <class Arch, class Chain, class Exec>
void depthwise_rows3x3_planes(const depthwise_plan& P, const TensorView<const float, 4>& in,
                              const TensorView<float, 4>& out, const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the planar depthwise kernel needs epilogues that accept along_width Sites");
    const index_t OH = out.h(), planes = out.n() * P.channels;
    // Splitting a plane changes no arithmetic: every output vector is computed the same way.
    const index_t chunks = planes >= 4 * index_t(exec.num_threads()) ? 1 : (OH + band_chunk_rows - 1) / band_chunk_rows;
    const index_t rows_per_chunk = (OH + chunks - 1) / chunks;
    exec.parallel_for(planes * chunks, [&](index_t t) {
        const index_t k = t % chunks, c = (t / chunks) % P.channels, n = t / chunks / P.channels;
        const index_t y0 = k * rows_per_chunk, y1 = std::min(OH, y0 + rows_per_chunk);
        if (y0 < y1) depthwise_rows3x3<Arch>(P, in, out, chain, n, c, y0, y1);
    });
}
#endif

}  // namespace opfuse::detail
