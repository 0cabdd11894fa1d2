// 3x3 depthwise convolution, stride 1, left/right padding 1, on planar (NCHW) tensors, for AVX2 (8 lanes):
// a vector holds 8 consecutive output pixels of one row of one channel, and each tap is one unaligned
// load of the input row, read in place, times a broadcast weight. Output rows run in pairs, which share
// their loads (4 input rows feed 2 output rows) and halve the per-row costs: the set-up, the two edge
// vectors and the lone vectors' FMA latency (on Zen 1, 144 channels at 56x56: 0.55 -> 0.46 ms).
//
// Why not the generic planar kernel (conv2d_depthwise_planar.hpp): it copies every input row into a
// zero-padded ring on the stack and computes whole groups of 4 vectors, so a 112-pixel row costs a
// 112-float copy and 128 pixels of FMAs. Here only a row's first and last vectors (whose taps reach the
// left/right padding, or past the row's end) take masked loads; everything else is 9 FMAs and 9 loads
// per output vector (6 loads in a pair). The AVX-512 column-sum trick (conv2d_depthwise_flat.hpp) does not
// carry over: shifting a vector by one lane across the two 128-bit halves costs two shuffles on AVX2
// (several micro-ops each on Zen 1), more than the two loads it saves.
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
bool depthwise_rows3x3_supports(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                const TensorView<float, 4>& out) {
    if constexpr (!is_avx2_family<Arch>) {
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
// Lanes of the 8 columns from x that lie inside [0, W) (all bits set).
inline __m256i row_window_mask(index_t x, index_t W) {
    const __m256i col = _mm256_add_epi32(_mm256_set1_epi32(int(x)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(int(W)), col));
}

// A row's edge vectors, whose taps reach columns outside [0, W): the one at x = 0 and at most one at
// `last` (>= W - 8; none when last == W). Their lane masks, per kernel column, depend only on x and W, so
// a task builds them once: per edge vector they were ~15 instructions each of the 3 masks.
struct row_edges {
    index_t last;
    __m256i first_mask[3], last_mask[3];
    index_t reach;  // the edge loads of a row read floats [row - 1, row + reach)
    row_edges(index_t first_interior, index_t interior_end, index_t W) {
        constexpr index_t S = 8;
        last = first_interior + (interior_end - first_interior + S - 1) / S * S;
        for (int kw = 0; kw < 3; ++kw) {
            first_mask[kw] = row_window_mask(kw - 1, W);
            last_mask[kw] = row_window_mask(last + kw - 1, W);
        }
        reach = (last < W ? last : 0) + S + 1;
    }
};

// 8 floats of `row` from column x, lanes outside `inside` zero. Where a row's edge loads all lie inside
// the input view (`InView`, every row but possibly the view's first and last), a plain load ANDed with
// the mask; elsewhere _mm256_maskload_ps, which never touches a masked-off lane's memory but costs ~150
// cycles per vector on Zen 1 (measured: 50 ns for an edge vector against 4 ns for an interior one).
template <bool InView>
OPFUSE_ALWAYS_INLINE __m256 load_row_window(const float* row, index_t x, __m256i inside) {
    // Outside the view the address is formed as an integer: only the masked load dereferences it.
    const auto* p = reinterpret_cast<const float*>(reinterpret_cast<std::uintptr_t>(row) + std::uintptr_t(x) * sizeof(float));
    if constexpr (InView)
        return _mm256_and_ps(_mm256_loadu_ps(p), _mm256_castsi256_ps(inside));
    else
        return _mm256_maskload_ps(p, inside);
}

// Output rows [y0, y1) of channel c of image n.
template <class Arch, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_rows3x3(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                            const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                            index_t c, index_t y0, index_t y1) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = 8;
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

    // Vectors starting at x in [first_interior, interior_end) read no column outside the row.
    const index_t first_interior = std::min(W, S), interior_end = std::max(first_interior, W - S);
    const row_edges edges(first_interior, interior_end, W);
    // The edge loads of input rows [first, last] stay inside the view (all rows but the view's first and last).
    auto edges_in_view = [&](const float* first, const float* last) {
        return reinterpret_cast<std::uintptr_t>(first) >= lo + sizeof(float) &&
               reinterpret_cast<std::uintptr_t>(last) + std::uintptr_t(edges.reach) * sizeof(float) <= hi;
    };
    // Column loads: plain for interior vectors; for an edge vector masked to its lanes inside the row, by
    // `mask` (one per kernel column; InView: see load_row_window).
    auto plain = [](const float* row, index_t col, auto) OPFUSE_UNROLLED { return B::load_unaligned(row + col); };
    auto masked = [](const __m256i(&mask)[3], auto in_view) {
        return [&mask](const float* row, index_t col, auto kw) OPFUSE_UNROLLED {
            return B(load_row_window<decltype(in_view)::value>(row, col, mask[kw]));
        };
    };
    auto finish = [&](float* dst_row, index_t y, index_t x, B acc, int lanes) OPFUSE_UNROLLED {
        store_channels<Arch>(dst_row + x, 1, lanes, chain(acc + bias, Site{n, y, x, oc, lanes, true}));
    };

    // R output rows from y whose kernel rows all lie inside the image. Input row r[k] (k = 0..R+1) feeds
    // output row j through kernel row k - j, so in a pair each loaded vector serves both rows (6 loads per
    // output vector instead of 9) and the two rows' FMA chains run side by side. Every output vector sums
    // its taps in the same order (kernel row, then column) whether its row runs alone or in a pair, so the
    // pairing (which depends on the task's rows) changes no bit of the result.
    auto full_rows = [&](index_t y, auto rows) OPFUSE_UNROLLED {
        constexpr int R = decltype(rows)::value;
        const float* r[R + 2];
        float* dst[R];
        for (int k = 0; k < R + 2; ++k) r[k] = plane + (y - P.pt + k) * in.stride(2);
        for (int j = 0; j < R; ++j) dst[j] = out.data() + out.offset(n, oc, y + j, 0);
        // NV vectors from x, each from `load(row, column, kw)`, stored with `lanes` lanes.
        auto vectors = [&](index_t x, auto nv, auto load, int lanes) OPFUSE_UNROLLED {
            constexpr int NV = decltype(nv)::value;
            B acc[R][NV];
            static_for<R>([&](auto j) OPFUSE_UNROLLED { static_for<NV>([&](auto i) OPFUSE_UNROLLED { acc[j][i] = B(0.f); }); });
            static_for<R + 2>([&](auto k) OPFUSE_UNROLLED {
                static_for<3>([&](auto kw) OPFUSE_UNROLLED {
                    static_for<NV>([&](auto i) OPFUSE_UNROLLED {
                        B v = load(r[k], x + i * S + kw - 1, kw);
                        if constexpr (R > 1) v = in_register<Arch>(v);  // one load for both rows' FMAs
                        static_for<R>([&](auto j) OPFUSE_UNROLLED {
                            constexpr int kh = int(k) - int(j);
                            if constexpr (kh >= 0 && kh < 3) acc[j][i] = xsimd::fma(v, w[kh][kw], acc[j][i]);
                        });
                    });
                });
            });
            static_for<R>([&](auto j) OPFUSE_UNROLLED {
                static_for<NV>([&](auto i) OPFUSE_UNROLLED { finish(dst[j], y + j, x + i * S, acc[j][i], lanes); });
            });
        };
        constexpr int NV = R == 1 ? 4 : 2;  // vectors in flight: R * NV independent FMA chains (latency 4-5)
        index_t x = first_interior;
        for (; x + (NV - 1) * S < interior_end; x += NV * S) vectors(x, std::integral_constant<int, NV>{}, plain, int(S));
        for (; x < interior_end; x += S) vectors(x, std::integral_constant<int, 1>{}, plain, int(S));
        auto edge_vectors = [&](auto in_view) OPFUSE_UNROLLED {
            const std::integral_constant<int, 1> one;
            vectors(0, one, masked(edges.first_mask, in_view), int(std::min(S, W)));
            if (edges.last < W)
                vectors(edges.last, one, masked(edges.last_mask, in_view), int(std::min(S, W - edges.last)));
        };
        if (edges_in_view(r[0], r[R + 1]))
            edge_vectors(std::true_type{});
        else
            edge_vectors(std::false_type{});
    };

    // A row with kernel rows in the top/bottom padding (the first and last output rows): only kernel rows
    // [kh0, kh1) are summed, one vector at a time. Padding rows are skipped, never multiplied by zero.
    auto padded_row = [&](index_t y) {
        const index_t top = y - P.pt;  // input row of kernel row 0
        const index_t kh0 = std::max<index_t>(0, -top), kh1 = std::min<index_t>(3, H - top);
        float* dst = out.data() + out.offset(n, oc, y, 0);
        auto vector = [&](index_t x, auto load, int lanes) OPFUSE_UNROLLED {
            B acc(0.f);
            for (index_t kh = kh0; kh < kh1; ++kh) {
                const float* row = plane + (top + kh) * in.stride(2);
                static_for<3>([&](auto kw) OPFUSE_UNROLLED { acc = xsimd::fma(load(row, x + kw - 1, kw), w[kh][kw], acc); });
            }
            finish(dst, y, x, acc, lanes);
        };
        for (index_t x = first_interior; x < interior_end; x += S) vector(x, plain, int(S));
        const bool in_view = kh0 < kh1 && edges_in_view(plane + (top + kh0) * in.stride(2),
                                                         plane + (top + kh1 - 1) * in.stride(2));
        auto edge = [&](index_t x, const __m256i(&mask)[3]) {
            const int lanes = int(std::min(S, W - x));
            if (in_view)
                vector(x, masked(mask, std::true_type{}), lanes);
            else
                vector(x, masked(mask, std::false_type{}), lanes);
        };
        edge(0, edges.first_mask);
        if (edges.last < W) edge(edges.last, edges.last_mask);
    };

    auto full = [&](index_t y) { return y - P.pt >= 0 && y - P.pt + 3 <= H; };
    for (index_t y = y0; y < y1;) {
        if (!full(y)) {
            padded_row(y);
            y += 1;
        } else if (y + 1 < y1 && full(y + 1)) {
            full_rows(y, std::integral_constant<int, 2>{});
            y += 2;
        } else {
            full_rows(y, std::integral_constant<int, 1>{});
            y += 1;
        }
    }
}

template <class Arch, class Chain, class Exec>
void depthwise_rows3x3_planes(const depthwise_plan& P, const TensorView<const float, 4>& in,
                              const TensorView<float, 4>& out, const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the planar depthwise kernel needs epilogues that accept along_width Sites");
    const index_t OH = out.h();
    for_each_plane_part(out.n(), P.channels, OH, (OH + band_chunk_rows - 1) / band_chunk_rows, exec,
                        [&](index_t n, index_t c, index_t y0, index_t y1) {
                            depthwise_rows3x3<Arch>(P, in, out, chain, n, c, y0, y1);
                        });
}
#endif

}  // namespace opfuse::detail
