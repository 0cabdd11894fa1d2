// Direct convolution as a batch-reduce GEMM over register tiles (design.md §3): a tile is MR output
// pixels x NV*S output channels of one group; its reduction runs over (kh, kw, input channel) with one
// micro-kernel segment per tap, or per row of taps when the kw taps of every pixel are contiguous in
// memory (NHWC, dilation 1, no horizontal padding: the segment is then KW*Cin long). Taps in the padding
// read a shared zero row, so there is no im2col buffer and no branch in the reduction.
#pragma once

#include <algorithm>
#include <type_traits>
#include <utility>

#include "../kernel/epilogue_tile.hpp"
#include "../kernel/gemm_tile.hpp"
#include "../kernel/nhwc_band.hpp"
#include "../kernel/stream_store.hpp"
#include "../kernel/vector_io.hpp"
#include "../epilogue/site.hpp"

namespace opfuse::detail {

// Everything the loop nest needs that is fixed at construction.
struct direct_plan {
    index_t groups, cin_g, cout_g;  // per group
    index_t in_group_offset;        // input channels between groups (cin_g; 0 for a per-group copy)
    index_t kh, kw, sh, sw, pt, pl, dh, dw;
    index_t blocks;                 // output-channel blocks of NR per group
    const float* weights;           // packed [group][block][kh][kw][cin_g][NR], zero-padded past cout_g
    const float* bias;              // per output channel, zero-padded (zeros when nothing was folded)
    const float* zeros;             // >= kw * cin_g zeros
    bool stream;                    // write the output with streaming stores (see stream_store.hpp)
};

// Runs bias (unless `BiasInAccumulators`: the reduction started from it) + epilogue chain on every
// accumulator of the tile (apply_epilogue), then stores the `valid` pixels. `Dense` means all
// channels of the block are real and the output is channel-contiguous: plain full-width stores.
template <class Arch, int MR, int NV, bool Dense, bool BiasInAccumulators = false, class Chain>
OPFUSE_ALWAYS_INLINE void finish_tile(accumulators<Arch, MR, NV>& acc, const float* bias, const Chain& chain,
                                      float* dst, const TensorView<float, 4>& out, index_t n, index_t ch0,
                                      const index_t (&oh)[MR], const index_t (&ow)[MR], int valid,
                                      index_t channels, bool stream) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    int lanes[NV];
    for (int v = 0; v < NV; ++v) lanes[v] = Dense ? S : int(std::clamp<index_t>(channels - v * S, 0, S));
    apply_epilogue<Arch, MR, NV, BiasInAccumulators>(acc, bias, chain, lanes,
                                 [&](int i, int v) { return Site{n, oh[i], ow[i], ch0 + v * S, lanes[v]}; });
    const index_t cs = out.stride(1);
    if (!Dense && cs != 1) {
        // Channel-strided output (NCHW): write channel by channel, so that the stores of one channel plane
        // stay together instead of hopping across all planes for every pixel.
        alignas(64) float tmp[MR][NV * S];
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v].store_aligned(&tmp[i][v * S]); }); });
        for (int v = 0; v < NV; ++v)
            for (int l = 0; l < lanes[v]; ++l) {
                float* plane = dst + (v * S + l) * cs;
                for (int i = 0; i < valid; ++i) plane[oh[i] * out.stride(2) + ow[i] * out.stride(3)] = tmp[i][v * S + l];
            }
        return;
    }
    // Constant indices only (static_for), or the accumulators would be forced out of registers.
    static_for<MR>([&](auto i) OPFUSE_UNROLLED {
        if (i >= valid) return;
        float* p = dst + oh[i] * out.stride(2) + ow[i] * out.stride(3);
        static_for<NV>([&](auto v) OPFUSE_UNROLLED {
            if constexpr (Dense) {
                if (stream)
                    stream_store<Arch>(p + v * S, acc[i][v]);
                else
                    acc[i][v].store_unaligned(p + v * S);
            }
            else if (lanes[v] > 0)
                store_channels<Arch>(p + v * S * cs, cs, lanes[v], acc[i][v]);
        });
    });
}

// Kernel rows [begin, end) of a tile's reduction. When direct_conv splits the reduction into passes over
// groups of kernel rows, a tile carries its accumulators from pass to pass in `partial` (MR x NR floats,
// 64-byte aligned; park/unpark in gemm_tile.hpp): reloaded before a pass that does not start at row 0,
// parked after one that does not end at the last row.
struct kernel_rows {
    index_t begin, end;
    float* partial;
};

// Computes one tile: pixels (oh[i], ow[i]) of image n, channel block b of group g. Pixels at i >= valid
// repeat pixel 0 (valid memory, computed, never stored). With a channel-strided input every tap must be
// inside the image for all pixels of the tile or for none (the row-tile scheme below guarantees it).
// `Dense`: see finish_tile.
// `rows`: the kernel rows this call reduces over (all of them unless direct_conv splits the reduction).
template <class Arch, int MR, int NV, bool Dense, class Chain>
OPFUSE_TILE_FUNCTION void direct_tile(const direct_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                 const Chain& chain, index_t n, index_t g, index_t b, const index_t (&oh)[MR],
                 const index_t (&ow)[MR], int valid, const kernel_rows& rows) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    constexpr int NR = NV * S;
    const index_t H = in.h(), W = in.w();
    const index_t sC = in.stride(1), sH = in.stride(2), sW = in.stride(3);
    const float* img = in.data() + n * in.stride(0) + g * P.in_group_offset * sC;
    const float* wblock = P.weights + (g * P.blocks + b) * P.kh * P.kw * P.cin_g * NR;

    index_t ih0[MR], iw0[MR];
    bool columns_inside = true;  // every pixel's kw taps lie inside the image horizontally
    for (int i = 0; i < MR; ++i) {
        ih0[i] = oh[i] * P.sh - P.pt;
        iw0[i] = ow[i] * P.sw - P.pl;
        columns_inside &= iw0[i] >= 0 && iw0[i] + (P.kw - 1) * P.dw < W;
    }
    const bool merge_row = columns_inside && sC == 1 && sW == P.cin_g && P.dw == 1;

    const index_t ch0 = g * P.cout_g + b * NR;
    if (rows.end == P.kh)
        prefetch_operands<NR>(chain, valid, [&](int i, index_t c) { return Site{n, oh[i], ow[i], ch0 + c, 1}; });
    accumulators<Arch, MR, NV> acc;
    if (rows.begin > 0)
        unpark<Arch, MR, NV>(acc, rows.partial);
    else
        zero<Arch, MR, NV>(acc);
    const float* px[MR];
    for (index_t kh = rows.begin; kh < rows.end; ++kh) {
        if (merge_row) {
            bool any = false;
            for (int i = 0; i < MR; ++i) {
                const index_t ih = ih0[i] + kh * P.dh;
                const bool ok = ih >= 0 && ih < H;
                px[i] = ok ? img + ih * sH + iw0[i] * sW : P.zeros;
                any |= ok;
            }
            if (any)
                accumulate<Arch, MR, NV, true>(acc, px, 1, wblock + kh * P.kw * P.cin_g * NR, P.kw * P.cin_g);
            continue;
        }
        for (index_t kw = 0; kw < P.kw; ++kw) {
            bool any = false;
            for (int i = 0; i < MR; ++i) {
                const index_t ih = ih0[i] + kh * P.dh, iw = iw0[i] + kw * P.dw;
                const bool ok = ih >= 0 && ih < H && iw >= 0 && iw < W;
                px[i] = ok ? img + ih * sH + iw * sW : P.zeros;
                any |= ok;
            }
            if (!any) continue;
            const float* wtap = wblock + (kh * P.kw + kw) * P.cin_g * NR;
            if (sC == 1)
                accumulate<Arch, MR, NV, true>(acc, px, 1, wtap, P.cin_g);
            else
                accumulate<Arch, MR, NV, false>(acc, px, sC, wtap, P.cin_g);
        }
    }

    if (rows.end < P.kh) {
        park<Arch, MR, NV>(acc, rows.partial);
        return;
    }
    finish_tile<Arch, MR, NV, Dense>(acc, P.bias + ch0, chain, out.data() + out.offset(n, ch0, 0, 0), out, n, ch0,
                                     oh, ow, valid, P.cout_g - b * NR, P.stream);
}

// Split a channel block's reduction into passes over kernel rows when its packed weights exceed this (see
// direct_conv): half of a 1 MiB L2, leaving room for the input and the partial sums.
#ifndef OPFUSE_PASS_WEIGHT_BYTES
#define OPFUSE_PASS_WEIGHT_BYTES (512 << 10)
#endif
inline constexpr index_t pass_weight_bytes = OPFUSE_PASS_WEIGHT_BYTES;
// Partial sums of a task's tiles between kernel-row passes, on the stack: 64 KiB.
inline constexpr index_t partial_capacity_floats = 16384;

// Output pixels [y0, y1) x [x0, x1).
struct pixel_rect {
    index_t y0, y1, x0, x1;
    index_t width() const { return x1 - x0; }
    index_t pixels() const { return (y1 - y0) * (x1 - x0); }
};

// The output image cut into the rectangles whose pixels reach the same kind of padding: the interior
// (every tap inside the input), the rows that reach the top and the bottom padding, and the left and
// right border columns of the rows between. Empty ones are left out. On a 7x7 image with a 3x3 kernel
// and padding 1: interior 5x5 (9 taps), top and bottom rows of 7 (6 taps, 4 at the corners), left and
// right columns of 5 (6 taps). 512 @7: 459 -> 411 tile rows x taps (each tile costs its full height).
struct pixel_regions {
    static constexpr int max_count = 5;
    pixel_rect rect[max_count];
    int count = 0;

    pixel_regions(const direct_plan& P, index_t H, index_t W, index_t OH, index_t OW) {
        // Outputs [first, end) read only inside [0, size) along one axis: o*s - pad >= 0 and
        // o*s - pad + (k - 1)*d <= size - 1.
        auto inside = [](index_t pad, index_t s, index_t k, index_t d, index_t size, index_t out_size) {
            const index_t first = std::min(out_size, (pad + s - 1) / s);
            const index_t last_reach = size - 1 - (k - 1) * d + pad;  // o*s must not exceed this
            const index_t end = std::clamp<index_t>(last_reach < 0 ? 0 : last_reach / s + 1, first, out_size);
            return std::pair<index_t, index_t>{first, end};
        };
        const auto [r0, r1] = inside(P.pt, P.sh, P.kh, P.dh, H, OH);
        const auto [c0, c1] = inside(P.pl, P.sw, P.kw, P.dw, W, OW);
        add({r0, r1, c0, c1});  // first: the largest, in row-major order as before
        add({0, r0, 0, OW});
        add({r1, OH, 0, OW});
        add({r0, r1, 0, c0});
        add({r0, r1, c1, OW});
    }

private:
    void add(const pixel_rect& r) {
        if (r.y1 > r.y0 && r.x1 > r.x0) rect[count++] = r;
    }
};

// Calls direct_tile for one tile, with the store path chosen once per channel block.
template <class Arch, int NV, class Chain>
struct tile_runner {
    const direct_plan& P;
    const TensorView<const float, 4>& in;
    const TensorView<float, 4>& out;
    const Chain& chain;
    index_t n, g, b;
    bool dense;

    template <int M>
    OPFUSE_ALWAYS_INLINE void operator()(const index_t (&oh)[M], const index_t (&ow)[M], int valid) const {
        (*this)(oh, ow, valid, kernel_rows{0, P.kh, nullptr});
    }
    template <int M>
    OPFUSE_ALWAYS_INLINE void operator()(const index_t (&oh)[M], const index_t (&ow)[M], int valid,
                                         const kernel_rows& rows) const {
        if (dense)
            direct_tile<Arch, M, NV, true>(P, in, out, chain, n, g, b, oh, ow, valid, rows);
        else
            direct_tile<Arch, M, NV, false>(P, in, out, chain, n, g, b, oh, ow, valid, rows);
    }
};

// Graded tile heights of the 6x4 AVX-512 tile: `len` pixels dealt evenly over ceil(len / 6) tiles of
// heights 6, 5, 4 and 3, so that no tile row computes a pixel twice (a tile costs its full height; a
// 7-pixel run is 4 + 3, not 6 + 3). Calls tile(std::integral_constant<int, height>{}, valid) for each tile
// in order; a run of 1 or 2 pixels is one tile of height 3.
template <class Tile>
OPFUSE_ALWAYS_INLINE void for_each_graded_tile(index_t len, Tile&& tile) {
    const index_t count = (len + 5) / 6;
    for (index_t k = 0; k < count; ++k) {
        const int valid = int(len * (k + 1) / count - len * k / count);
        if (valid == 6)
            tile(std::integral_constant<int, 6>{}, valid);
        else if (valid == 5)
            tile(std::integral_constant<int, 5>{}, valid);
        else if (valid == 4)
            tile(std::integral_constant<int, 4>{}, valid);
        else
            tile(std::integral_constant<int, 3>{}, valid);
    }
}

// Calls tile(std::integral_constant<int, height>{}, valid) for the tiles of a run of `len` pixels: the
// graded heights of the 6x4 tile (for_each_graded_tile), else full tiles and a half-height last one when
// the rest fits it. Either way ceil(len / MR) tiles.
template <int MR, int NV, class Tile>
OPFUSE_ALWAYS_INLINE void for_each_pixel_tile(index_t len, Tile&& tile) {
    if constexpr (MR == 6 && NV == 4) {
        for_each_graded_tile(len, tile);
    } else {
        for (index_t p = 0; p < len; p += MR) {
            const int valid = int(std::min<index_t>(MR, len - p));
            if (valid > MR / 2)
                tile(std::integral_constant<int, MR>{}, valid);
            else
                tile(std::integral_constant<int, MR / 2>{}, valid);
        }
    }
}

inline bool short_reduction(const direct_plan& P) { return short_reduction(P.kw, P.cin_g); }

// Where a band's image lies: band row 0 is input row `top` of an image of `rows` rows, whose columns are
// band columns [left, left + cols). The sweep computes output columns [x_begin, x_end) of the row, and
// x_begin's first tap is band column 0.
struct band_extent {
    index_t top, rows, left, cols;
    index_t x_begin, x_end;
};

// One output row y of channel block b from a band (see direct_conv: band row kh*dh is kernel row kh,
// padding included, dilation 1 along the row). The same tiles as direct_tile, with what they share hoisted
// out of the tile loop: the pixels of a tile are evenly spaced in the band, so their addresses need no
// bounds checks. For short reductions (27 FMAs per accumulator in the first layer) the per-tile set-up of
// direct_tile was a fifth of the time. Taps that read only padding for every pixel of a tile are skipped:
// on a 7x7 image, 2 kernel rows of 21 and a third of the 1-pixel tile that ends each row. `graded`: the
// 6x4 tile's columns are dealt evenly over tiles of heights 6 to 3 (see direct_conv).
template <class Arch, int MR, int NV, bool Dense, class Chain>
OPFUSE_TILE_FUNCTION void band_row_sweep(const direct_plan& Q, const TensorView<const float, 4>& band,
                                         const band_extent& image, const TensorView<float, 4>& out,
                                         const Chain& chain, index_t n, index_t g, index_t b, index_t y,
                                         bool graded) {
    constexpr int NR = NV * int(xsimd::batch<float, Arch>::size);
    const index_t cin = Q.cin_g, pixel_step = Q.sw * band.stride(3);
    const float* wblock = Q.weights + (g * Q.blocks + b) * Q.kh * Q.kw * cin * NR;
    const index_t ch0 = g * Q.cout_g + b * NR;
    float* dst = out.data() + out.offset(n, ch0, 0, 0);
    // One tile of M pixel rows, `valid` of them real, starting at output column x.
    auto tile = [&](auto rows, index_t x, int valid) OPFUSE_UNROLLED {
        constexpr int M = decltype(rows)::value;
        // Taps [kw_begin, kw_end) reach the image for some pixel of the tile: kw_begin + column of the last
        // pixel >= left, kw_end - 1 + column of the first pixel < left + cols.
        const index_t first_col = (x - image.x_begin) * Q.sw, last_col = first_col + (valid - 1) * Q.sw;
        const index_t kw_begin = std::clamp<index_t>(image.left - last_col, 0, Q.kw);
        const index_t kw_end = std::clamp<index_t>(image.left + image.cols - first_col, kw_begin, Q.kw);
        prefetch_operands<NR>(chain, valid, [&](int i, index_t c) { return Site{n, y, x + i, ch0 + c, 1}; });
        accumulators<Arch, M, NV> acc;
        start_from_bias<Arch, M, NV>(acc, Q.bias + ch0);
        for (index_t kh = 0; kh < Q.kh && kw_end > kw_begin; ++kh) {
            if (image.top + kh * Q.dh < 0 || image.top + kh * Q.dh >= image.rows) continue;
            const float* first = band.data() + kh * Q.dh * band.stride(2) + first_col * band.stride(3) + kw_begin * cin;
            const float* px[M];
            for (int i = 0; i < M; ++i) px[i] = first + (i < valid ? i : 0) * pixel_step;
            accumulate<Arch, M, NV, true>(acc, px, 1, wblock + (kh * Q.kw + kw_begin) * cin * NR,
                                          (kw_end - kw_begin) * cin);
        }
        index_t oh[M], ow[M];
        for (int i = 0; i < M; ++i) oh[i] = y, ow[i] = x + (i < valid ? i : 0);
        finish_tile<Arch, M, NV, Dense, true>(acc, Q.bias + ch0, chain, dst, out, n, ch0, oh, ow, valid,
                                        Q.cout_g - b * NR, Q.stream);
    };
    index_t x = image.x_begin;
    const index_t OW = image.x_end;
    if constexpr (MR == 6 && NV == 4) {
        if (graded) {  // 28-pixel rows: 5 + 6 + 5 + 6 + 6 instead of 4 x 6 + 6 for the last 4
            for_each_graded_tile(OW - x, [&](auto rows, int valid) OPFUSE_UNROLLED {
                tile(rows, x, valid);
                x += valid;
            });
            return;
        }
    }
    for (; x + MR <= OW; x += MR) tile(std::integral_constant<int, MR>{}, x, MR);
    // The row's last few pixels run on a half-height tile when they fit one: a 7-pixel row (512 @7) is
    // a 6-pixel and a 3-pixel tile instead of two 6-pixel ones (each tile costs its full height).
    const int rest = int(OW - x);
    if (rest > MR / 2)
        tile(std::integral_constant<int, MR>{}, x, rest);
    else if (rest > 0)
        tile(std::integral_constant<int, MR / 2>{}, x, rest);
}

template <class Arch, int NV, class Chain, class Exec>
void direct_conv(const direct_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                 const Chain& chain, Exec& exec) {
    constexpr int MR = tile_shape<Arch>::template mr<NV>;
    constexpr index_t NR = NV * index_t(xsimd::batch<float, Arch>::size);
    const index_t N = out.n(), OH = out.h(), OW = out.w();
    auto runner = [&](index_t n, index_t g, index_t b) {
        const bool dense = (b + 1) * NR <= P.cout_g && out.stride(1) == 1;
        return tile_runner<Arch, NV, Chain>{P, in, out, chain, n, g, b, dense};
    };

    // Output row y of image n, group g, all channel blocks, from a band copy `bv` of its input (plan Q).
    // A channel-strided output (NCHW) row is staged: the tiles store full vectors into an NHWC row of all
    // channels on the stack, transposed into the channel planes when the row is done (instead of one scalar
    // store per value).
    // Graded tile heights on the band path (band_row_sweep) only while a channel block's packed weights fit
    // L2 (twice pass_weight_bytes). Measured (NCHW, 6 interleaved runs): 128 @28 and 256 @14 about 5 %
    // faster; 512 @7, whose 1.2 MB blocks every tile streams from L3, 1.14x slower with 4 + 3 tiles per
    // 7-pixel row than with 6 + 3.
    const index_t block_bytes = P.kh * P.kw * P.cin_g * NR * index_t(sizeof(float));  // one channel block's
    const bool graded = block_bytes <= 2 * pass_weight_bytes;
    // Output columns [x0, x1) of the row; the band's column 0 is input column x0 * sw - pl.
    auto band_row = [&](const direct_plan& Q, const TensorView<const float, 4>& bv, index_t n, index_t g,
                        index_t y, index_t x0, index_t x1) {
        alignas(64) float stage_storage[band_capacity_floats];
        const staged_output_row<Arch> stage(stage_storage, out);
        const TensorView<float, 4>& dst = stage.target();
        const band_extent image{y * P.sh - P.pt, in.h(), P.pl - x0 * P.sw, in.w(), x0, x1};
        for (index_t b = 0; b < P.blocks; ++b) {
            const bool dense = (b + 1) * NR <= P.cout_g && dst.stride(1) == 1;
            if (Q.dw == 1) {
                if (dense)
                    band_row_sweep<Arch, MR, NV, true>(Q, bv, image, dst, chain, n, g, b, y, graded);
                else
                    band_row_sweep<Arch, MR, NV, false>(Q, bv, image, dst, chain, n, g, b, y, graded);
                continue;
            }
            const tile_runner<Arch, NV, Chain> tile{Q, bv, dst, chain, n, g, b, dense};  // x0 == 0, x1 == OW
            for (index_t x = 0; x < OW; x += MR) {
                index_t oh[MR], ow[MR];
                const int valid = int(std::min<index_t>(MR, OW - x));
                for (int i = 0; i < MR; ++i) oh[i] = y, ow[i] = x + (i < valid ? i : 0);
                tile(oh, ow, valid);
            }
        }
        stage.flush(n, y, g * P.cout_g, P.cout_g, x0, x1);
        if (P.stream) stream_fence();
    };
    const index_t W = in.w(), band_rows = (P.kh - 1) * P.dh + 1;

    // The band path: per output row, the input rows it reads are held in a sliding band on the stack,
    // [row][column][channel] with the padding materialised as zeros (nhwc_band.hpp), and the
    // channel-contiguous tiles run on it without a bounds check: every kernel row of every pixel is one
    // contiguous segment of KW*Cin values (dilation 1). A task is a chunk of output rows, so each input row
    // is copied about once. It serves
    //   - channel-strided inputs (NCHW): the band is their transposed copy, W*Cin moves per input row
    //     against OW*Cout*KH*KW*Cin FMAs;
    //   - short reductions (the first layer, 3x3 over 3 channels): a tile touching the padding would
    //     otherwise run one 3-long segment per tap; on the band every tile runs KH segments of KW*Cin.
    // Rows too wide for the band (NCHW 64 @224: 3 x 226 x 64 floats) are cut into column segments (dilation
    // 1 only): a task then holds the input columns of one segment of output columns (widths a multiple of
    // the vector size where it fits, so that the output rows' transposes still stream).
    auto columns_of = [&](index_t out_cols) { return (out_cols - 1) * P.sw + (P.kw - 1) * P.dw + 1; };
    const index_t most_columns = band_capacity_floats / (band_rows * P.cin_g);
    index_t segment = OW;
    if (columns_of(OW) > most_columns && P.dw == 1) {
        const index_t most_outputs = most_columns < P.kw ? 0 : (most_columns - P.kw) / P.sw + 1;
        if (most_outputs >= 2 * MR) {
            constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
            const index_t count = (OW + most_outputs - 1) / most_outputs, even = (OW + count - 1) / count;
            const index_t rounded = (even + S - 1) / S * S;
            segment = rounded <= most_outputs ? rounded : even;
        }
    }
    if ((in.stride(1) != 1 || short_reduction(P)) && columns_of(segment) <= most_columns) {
        const index_t chunks = (OH + band_chunk_rows - 1) / band_chunk_rows, segments = (OW + segment - 1) / segment;
        exec.parallel_for(N * P.groups * chunks * segments, [&](index_t t) {
            const index_t x0 = (t % segments) * segment, x1 = std::min(OW, x0 + segment);
            const index_t y0 = (t / segments % chunks) * band_chunk_rows, g = (t / segments / chunks) % P.groups;
            const index_t n = t / segments / chunks / P.groups;
            alignas(64) float storage[band_capacity_floats];
            nhwc_band<Arch> band(storage, band_capacity_floats, in, n, g * P.cin_g, band_rows, P.cin_g, x0 * P.sw - P.pl,
                                 columns_of(x1 - x0));
            direct_plan Q = P;
            Q.pt = 0, Q.sh = 0, Q.pl = 0;  // output row y reads band rows 0, dh, 2 dh, ... from column 0
            Q.in_group_offset = 0;
            for (index_t y = y0; y < std::min(OH, y0 + band_chunk_rows); ++y) {
                band.slide_to(y * P.sh - P.pt);
                band_row(Q, band.view(), n, g, y, x0, x1);
            }
        });
        return;
    }

    if (in.stride(1) == 1) {
        // Channel-contiguous input: tiles run along the flattened output pixels of a region (crossing
        // rows), so small images (7x7, 14x14) still fill whole tiles. The regions (pixel_regions) keep
        // border pixels out of the interior's tiles: a tile skips only the taps that are padding for all
        // of its pixels, and tiles that mixed border and interior pixels ran every tap for every pixel.
        // The pixels of a region are cut into chunks of tiles_per_task tiles, numbered region by region.
        // A task runs a range of chunks for one channel block.
        const pixel_regions regions(P, in.h(), in.w(), OH, OW);
        const index_t pixels = OH * OW, tiles = (pixels + MR - 1) / MR;
        index_t tiles_per_task = 8, tasks_per_block = 0;  // 0: one chunk per task
        index_t rows_per_pass = P.kh;
        if (block_bytes > (index_t(128) << 10)) {
            // A task streams its block's packed weights once per tile. When they are large (deep layers
            // on small images), make the tasks as long as the thread count allows, so the weights are
            // fetched from memory once per task and then reused from L2.
            const index_t other_tasks = N * P.groups * P.blocks, wanted = 2 * index_t(exec.num_threads());
            const index_t chunks_needed = std::max<index_t>(1, (wanted + other_tasks - 1) / other_tasks);
            tiles_per_task = std::max<index_t>(tiles_per_task, (tiles + chunks_needed - 1) / chunks_needed);
            // Past what L2 holds beside the input (512 @7: 1.2 MB per block), a task runs all its tiles
            // once per group of kernel rows instead, so that each group's weights come from L3 once per
            // task rather than once per tile. Then a task spans all the regions' chunks that its tiles'
            // partial sums leave room for.
            if (block_bytes > pass_weight_bytes && P.kh > 1) {
                const index_t row_bytes = block_bytes / P.kh;
                rows_per_pass = std::max<index_t>(1, pass_weight_bytes / row_bytes);
                tasks_per_block = chunks_needed;
                tiles_per_task = std::min(tiles_per_task, partial_capacity_floats / (MR * NR));
            }
        }
        const index_t chunk = MR * tiles_per_task;
        index_t first_chunk[pixel_regions::max_count + 1] = {0};  // chunks are numbered region by region
        for (int r = 0; r < regions.count; ++r)
            first_chunk[r + 1] = first_chunk[r] + (regions.rect[r].pixels() + chunk - 1) / chunk;
        const index_t chunks = first_chunk[regions.count];
        // Chunk c: pixels [begin, end) of region R, in row-major order within the region.
        struct chunk_span {
            const pixel_rect* R;
            index_t begin, end;
        };
        auto span_of = [&](index_t c) {
            int r = 0;
            while (c >= first_chunk[r + 1]) ++r;
            const pixel_rect& R = regions.rect[r];
            const index_t begin = (c - first_chunk[r]) * chunk;
            return chunk_span{&R, begin, std::min(R.pixels(), begin + chunk)};
        };
        // The partial sums of a task's tiles must fit partial_capacity_floats: split the chunks over more
        // tasks until they do (one chunk alone always fits: tiles_per_task was capped above).
        auto fits = [&](index_t tasks) {
            for (index_t s = 0; s < tasks; ++s) {
                index_t count = 0;
                for (index_t c = s * chunks / tasks; c < (s + 1) * chunks / tasks; ++c) {
                    const chunk_span span = span_of(c);
                    count += (span.end - span.begin + MR - 1) / MR;
                }
                if (count * MR * NR > partial_capacity_floats) return false;
            }
            return true;
        };
        if (tasks_per_block > 0)
            while (tasks_per_block < chunks && !fits(tasks_per_block)) ++tasks_per_block;
        else
            tasks_per_block = chunks;
        const bool split = rows_per_pass < P.kh;

        exec.parallel_for(N * P.groups * tasks_per_block * P.blocks, [&](index_t t) {
            const index_t b = t % P.blocks, s = (t / P.blocks) % tasks_per_block;
            const index_t g = (t / P.blocks / tasks_per_block) % P.groups, n = t / P.blocks / tasks_per_block / P.groups;
            const index_t c_begin = s * chunks / tasks_per_block, c_end = (s + 1) * chunks / tasks_per_block;
            const auto tile = runner(n, g, b);
            // Calls run(oh, ow, valid) for every tile of the task's chunks, in order.
            auto for_each_tile = [&](auto&& run) {
                for (index_t c = c_begin; c < c_end; ++c) {
                    const auto [Rp, begin, end] = span_of(c);
                    const pixel_rect& R = *Rp;
                    index_t y = R.y0 + begin / R.width(), x = R.x0 + begin % R.width();
                    auto next_tile = [&](auto rows, int valid) {
                        constexpr int M = decltype(rows)::value;
                        index_t oh[M], ow[M];
                        for (int i = 0; i < M; ++i) {
                            oh[i] = i < valid ? y : oh[0];
                            ow[i] = i < valid ? x : ow[0];
                            if (i < valid && ++x == R.x1) x = R.x0, ++y;
                        }
                        run(oh, ow, valid);
                    };
                    // The 6x4 tile (AVX-512) comes in heights 6, 5, 4 and 3, and a chunk's pixels are dealt
                    // evenly over its tiles, so that no tile row computes a pixel twice: on a 7x7 image the
                    // interior's 25 pixels are 5 tiles of 5 and a 7-pixel row 4 + 3 (with heights 6 and 3
                    // only: 4 x 6 + 3 and 6 + 3, 57 tile rows for 49 pixels). Other tiles: a chunk's last few
                    // pixels on a half-height tile when they fit one.
                    for_each_pixel_tile<MR, NV>(end - begin, next_tile);
                }
            };
            if (!split) {
                for_each_tile([&](const auto& oh, const auto& ow, int valid) { tile(oh, ow, valid); });
            } else {
                alignas(64) float partial[partial_capacity_floats];
                for (index_t kh = 0; kh < P.kh; kh += rows_per_pass) {
                    float* slot = partial;
                    for_each_tile([&](const auto& oh, const auto& ow, int valid) {
                        tile(oh, ow, valid, kernel_rows{kh, std::min(P.kh, kh + rows_per_pass), slot});
                        slot += MR * NR;
                    });
                }
            }
            if (P.stream) stream_fence();
        });
        return;
    }

    // Other channel-strided inputs: tiles stay inside one output row and border pixels (whose taps reach
    // into the horizontal padding) are computed one at a time, so every tap of a tile is all-in or all-out.
    const index_t first_inside = std::min(OW, (P.pl + P.sw - 1) / P.sw);
    const index_t last_reach = W - 1 - (P.kw - 1) * P.dw + P.pl;  // ow*sw must not exceed this
    const index_t end_inside = std::clamp<index_t>(last_reach < 0 ? 0 : last_reach / P.sw + 1, first_inside, OW);
    exec.parallel_for(N * P.groups * OH * P.blocks, [&](index_t t) {
        const index_t b = t % P.blocks, y = (t / P.blocks) % OH;
        const index_t g = (t / P.blocks / OH) % P.groups, n = t / P.blocks / OH / P.groups;
        const auto tile = runner(n, g, b);
        auto single = [&](index_t x) {
            const index_t oh[1] = {y}, ow[1] = {x};
            tile(oh, ow, 1);
        };
        for (index_t x = 0; x < first_inside; ++x) single(x);
        for (index_t x = first_inside; x < end_inside; x += MR) {
            index_t oh[MR], ow[MR];
            const int valid = int(std::min<index_t>(MR, end_inside - x));
            for (int i = 0; i < MR; ++i) oh[i] = y, ow[i] = x + (i < valid ? i : 0);
            tile(oh, ow, valid);
        }
        for (index_t x = end_inside; x < OW; ++x) single(x);
        if (P.stream) stream_fence();
    });
}

}  // namespace opfuse::detail
