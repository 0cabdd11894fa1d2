// Depthwise convolution (groups = in = out channels), NHWC: vectorized over channels, a register tile of
// MR output pixels along one output row. It is bound by loads and memory, not FMAs: each tap is one weight
// vector and MR input vectors. Interior tiles run without checks; tiles touching the padding read a zero
// vector for the taps outside the image.
#pragma once

#include <algorithm>
#include <utility>

#include "../core/static_for.hpp"
#include "../kernel/epilogue_tile.hpp"
#include "../kernel/nhwc_band.hpp"
#include "../kernel/vector_io.hpp"
#include "../epilogue/site.hpp"

namespace opfuse::detail {

struct depthwise_plan {
    index_t channels;
    index_t kh, kw, sh, sw, pt, pl, dh, dw;
    const float* weights;  // packed [channel vector][kh][kw][S], zero-padded past `channels`
    const float* bias;     // per channel, zero-padded
    const float* zeros;    // >= S zeros
    // The output channel of channel 0 of `weights`, `bias` and the input: non-zero when the input is a band
    // copy of a block of channels (channel-strided inputs, see depthwise_conv). Only the output offset and
    // the epilogue's Site use it.
    index_t channel_base = 0;
};

// Output pixels [begin, end) of a row read no padding column: x*SW - pl >= 0 and its last tap < W.
inline std::pair<index_t, index_t> depthwise_inside_columns(const depthwise_plan& P, index_t W, index_t OW) {
    const index_t begin = std::min(OW, (P.pl + P.sw - 1) / P.sw);
    const index_t last_reach = W - 1 - (P.kw - 1) * P.dw + P.pl;
    const index_t end = std::clamp<index_t>(last_reach < 0 ? 0 : last_reach / P.sw + 1, begin, OW);
    return {begin, end};
}

// Prefetches the input row(s) that the next output row reads for the first time, over this tile's columns
// and channel vector, for the generic per-tile path below. Depthwise does ~9 FMAs per input load, so it runs
// at the speed its loads arrive, and the hardware prefetcher does not follow the pixel-strided pattern of
// one channel vector. Measured on the earlier 3x3 per-tile kernel (same loop order): ~20 % faster; not
// measured on this generic path itself. The row sweep does not use it (no gain measured there).
template <int MR>
OPFUSE_ALWAYS_INLINE void prefetch_next_rows(const depthwise_plan& P, const float* img, index_t H, index_t W,
                                             index_t sH, index_t sW, index_t y, index_t x0) {
    const index_t last = (y + 1) * P.sh - P.pt + (P.kh - 1) * P.dh;  // the newest row of output row y + 1
    const index_t iw0 = x0 * P.sw - P.pl;
    for (index_t r = std::max<index_t>(0, last - P.sh + 1); r <= last && r < H; ++r)
        for (index_t c = std::max<index_t>(0, iw0); c < std::min<index_t>(W, iw0 + MR * P.sw); ++c)
            __builtin_prefetch(img + r * sH + c * sW, 0, 3);
}

// `Inside`: no tap of the tile reaches the padding. `Full`: all S channels are real (else the channel
// tail is loaded lane by lane, so the last pixel of the tensor is never over-read).
template <class Arch, int MR, bool Inside, bool Full, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_tile(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                         const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                         index_t y, index_t x0, int valid, index_t cv) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    const index_t H = in.h(), W = in.w(), sH = in.stride(2), sW = in.stride(3);
    const index_t c0 = cv * S, oc0 = P.channel_base + c0;
    const float* img = in.data() + n * in.stride(0) + c0;
    const float* wbase = P.weights + cv * P.kh * P.kw * S;
    // A compile-time lane count for full vectors keeps the epilogue's operand loads (Add) off their
    // channel-tail path.
    const int lanes = Full ? S : int(std::min<index_t>(S, P.channels - c0));
    prefetch_next_rows<MR>(P, img, H, W, sH, sW, y, x0);
    accumulators<Arch, MR, 1> acc;
    zero<Arch, MR, 1>(acc);
    for (index_t kh = 0; kh < P.kh; ++kh) {
        const index_t ih = y * P.sh - P.pt + kh * P.dh;
        if (ih < 0 || ih >= H) continue;
        const float* row = img + ih * sH;
        for (index_t kw = 0; kw < P.kw; ++kw) {
            const B w = B::load_aligned(wbase + (kh * P.kw + kw) * S);
            static_for<MR>([&](auto i) OPFUSE_UNROLLED {
                const index_t iw = (x0 + i) * P.sw - P.pl + kw * P.dw;
                const float* p = row + iw * sW;
                if constexpr (!Inside) p = (iw >= 0 && iw < W) ? p : P.zeros;
                const B a = Full ? B::load_unaligned(p) : load_channels<Arch>(p, 1, lanes);
                acc[i][0] = xsimd::fma(a, w, acc[i][0]);
            });
        }
    }
    // Epilogue on the whole tile, then the stores. Rows past `valid` (the row's tail) get the Site of the
    // last real pixel, so an epilogue never reads an operand outside the output's extent.
    const int tile_lanes[1] = {lanes};
    apply_epilogue<Arch, MR, 1>(acc, P.bias + c0, chain, tile_lanes,
                                [&](int i, int) { return Site{n, y, x0 + std::min(i, valid - 1), oc0, lanes}; });
    static_for<MR>([&](auto i) OPFUSE_UNROLLED {
        if (int(i) >= valid) return;
        store_channels<Arch>(out.data() + out.offset(n, oc0, y, x0 + i), out.stride(1), lanes, acc[i][0]);
    });
}

// The common case: a square K x K kernel (3 or 5), dilation 1 along the row, row stride SW (1 or 2). One
// call sweeps one output row for one channel vector. The K*K weight vectors are loaded once and stay in
// registers for the whole row, and tiles of MR pixels load each input column vector of a kernel row once
// for every (pixel, tap) pair that reads it: (MR-1)*SW+K loads for MR*K FMAs. Pixels whose taps reach the
// left or right padding run one at a time, skipping those taps. Sweeping a whole row per channel vector
// (instead of all channel vectors per tile of pixels) amortizes the weight loads and the set-up over the
// row: measured 2.2x faster than 14-pixel tiles that reloaded weights per kernel row.
template <class Arch, int MR, int K, int SW, bool Full, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_row_sweep(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                              const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                              index_t y, index_t cv, index_t inside_begin, index_t inside_end) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    const index_t H = in.h(), W = in.w(), sH = in.stride(2), sW = in.stride(3), OW = out.w();
    const index_t c0 = cv * S, oc0 = P.channel_base + c0;
    const int lanes = Full ? S : int(std::min<index_t>(S, P.channels - c0));  // constant: see depthwise_tile
    const int tile_lanes[1] = {lanes};
    const float* bias = P.bias + c0;
    const float* img = in.data() + n * in.stride(0) + c0;
    float* dst = out.data() + out.offset(n, oc0, y, 0);
    const index_t dst_step = out.stride(3), cs = out.stride(1);
    const float* rows[K];  // kernel row kh reads input row rows[kh]; null when it is in the padding
    static_for<K>([&](auto kh) {
        const index_t ih = y * P.sh - P.pt + kh * P.dh;
        rows[kh] = (ih >= 0 && ih < H) ? img + ih * sH : nullptr;
    });
    B w[K][K];
    static_for<K>([&](auto kh) {
        static_for<K>([&](auto kw) { w[kh][kw] = B::load_aligned(P.weights + ((cv * K + kh) * K + kw) * S); });
    });
    auto load = [&](const float* p) { return Full ? B::load_unaligned(p) : load_channels<Arch>(p, 1, lanes); };

    // One pixel; `Checked`: some of its taps may fall in the left/right padding.
    auto pixel = [&](index_t x, auto checked) {
        accumulators<Arch, 1, 1> acc;
        zero<Arch, 1, 1>(acc);
        const index_t iw0 = x * SW - P.pl;
        static_for<K>([&](auto kh) {
            if (rows[kh] == nullptr) return;
            static_for<K>([&](auto kw) {
                if (decltype(checked)::value && (iw0 + kw < 0 || iw0 + kw >= W)) return;
                acc[0][0] = xsimd::fma(load(rows[kh] + (iw0 + kw) * sW), w[kh][kw], acc[0][0]);
            });
        });
        apply_epilogue<Arch, 1, 1>(acc, bias, chain, tile_lanes, [&](int, int) { return Site{n, y, x, oc0, lanes}; });
        store_channels<Arch>(dst + x * dst_step, cs, lanes, acc[0][0]);
    };
    // M <= MR pixels, all taps inside the row.
    auto tile = [&](auto pixels, index_t x) {
        constexpr int M = decltype(pixels)::value;
        constexpr int COLS = (M - 1) * SW + K;
        accumulators<Arch, M, 1> acc;
        zero<Arch, M, 1>(acc);
        const index_t iw0 = x * SW - P.pl;
        static_for<K>([&](auto kh) {
            if (rows[kh] == nullptr) return;
            const float* r = rows[kh] + iw0 * sW;
            static_for<COLS>([&](auto c) OPFUSE_UNROLLED {
                const B a = in_register<Arch>(load(r + c * sW));  // loaded once for its K FMAs
                static_for<K>([&](auto kw) {
                    constexpr int d = decltype(c)::value - decltype(kw)::value;  // = i * SW
                    if constexpr (d >= 0 && d % SW == 0 && d / SW < M)
                        acc[d / SW][0] = xsimd::fma(a, w[kh][kw], acc[d / SW][0]);
                });
            });
        });
        apply_epilogue<Arch, M, 1>(acc, bias, chain, tile_lanes, [&](int i, int) { return Site{n, y, x + i, oc0, lanes}; });
        static_for<M>([&](auto i) OPFUSE_UNROLLED { store_channels<Arch>(dst + (x + i) * dst_step, cs, lanes, acc[i][0]); });
    };

    using checked = std::true_type;
    using unchecked = std::false_type;
    index_t x = 0;
    for (; x < inside_begin; ++x) pixel(x, checked{});
    for (; x + MR <= inside_end; x += MR) tile(std::integral_constant<int, MR>{}, x);
    // The rest of the inside pixels as one shorter tile: a lone pixel is one chain of K*K dependent FMAs.
    static_for<MR>([&](auto m) {
        if constexpr (decltype(m)::value >= 2) {
            if (inside_end - x == decltype(m)::value) tile(m, x), x += decltype(m)::value;
        }
    });
    for (; x < inside_end; ++x) pixel(x, unchecked{});
    for (; x < OW; ++x) pixel(x, checked{});
}

// Output row y of image n, every channel vector: the row sweep for 3x3 (and 5x5 on AVX-512) kernels with
// dilation 1 along the row and stride 1 or 2; otherwise tiles of MR pixels, all channel vectors of a tile
// before the next tile.
template <class Arch, class Chain>
void depthwise_row(const depthwise_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                   const Chain& chain, index_t n, index_t y) {
    constexpr int S = int(xsimd::batch<float, Arch>::size);
    constexpr bool wide = S >= 16;  // 32 vector registers: room for the 25 weights of a 5x5 kernel
    const index_t vectors = (P.channels + S - 1) / S, full_vectors = P.channels / S;
    const auto [inside_begin, inside_end] = depthwise_inside_columns(P, in.w(), out.w());
    auto sweep = [&, inside_begin = inside_begin, inside_end = inside_end](auto k, auto sw) {
        // 3x3 with 16 registers: 9 weights + 5 accumulators + 1 input column. 5 pixels rather than 4 keep
        // 5 FMA chains in flight (FMA latency 4-5 cycles): Zen 1, 144 @56 0.34-0.35 -> 0.31-0.32 ms (min of
        // 5 x 30 calls, 3 alternating rounds, with the shorter last tile below), 32 @112 0.29 -> 0.28.
        constexpr int K = decltype(k)::value, SW = decltype(sw)::value, MR = K == 3 ? (wide ? 6 : 5) : 4;
        for (index_t cv = 0; cv < vectors; ++cv) {
            if (cv < full_vectors)
                depthwise_row_sweep<Arch, MR, K, SW, true>(P, in, out, chain, n, y, cv, inside_begin, inside_end);
            else
                depthwise_row_sweep<Arch, MR, K, SW, false>(P, in, out, chain, n, y, cv, inside_begin, inside_end);
        }
    };
    using std::integral_constant;
    if (P.dw == 1 && P.kh == P.kw && (P.sw == 1 || P.sw == 2) && (P.kw == 3 || (wide && P.kw == 5))) {
        const bool s1 = P.sw == 1;
        if (P.kw == 3) {
            if (s1) return sweep(integral_constant<int, 3>{}, integral_constant<int, 1>{});
            return sweep(integral_constant<int, 3>{}, integral_constant<int, 2>{});
        }
        if constexpr (wide) {
            if (s1) return sweep(integral_constant<int, 5>{}, integral_constant<int, 1>{});
            return sweep(integral_constant<int, 5>{}, integral_constant<int, 2>{});
        }
    }
    constexpr int MR = wide ? 8 : 4;
    const index_t OW = out.w();
    for (index_t x = 0; x < OW; x += MR) {
        const int valid = int(std::min<index_t>(MR, OW - x));
        const bool inside = x >= inside_begin && x + MR <= inside_end;
        for (index_t cv = 0; cv < vectors; ++cv) {
            if (inside && cv < full_vectors)
                depthwise_tile<Arch, MR, true, true>(P, in, out, chain, n, y, x, valid, cv);
            else if (cv < full_vectors)
                depthwise_tile<Arch, MR, false, true>(P, in, out, chain, n, y, x, valid, cv);
            else
                depthwise_tile<Arch, MR, false, false>(P, in, out, chain, n, y, x, valid, cv);
        }
    }
}

// Whether depthwise_conv can run this input: channel-contiguous, or a band of one vector of channels over
// the input rows of one output row fits the stack band.
template <class Arch>
bool depthwise_supports(const depthwise_plan& P, const TensorView<const float, 4>& in) {
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    return in.stride(1) == 1 || ((P.kh - 1) * P.dh + 1) * in.w() * S <= band_capacity_floats;
}

// Any output strides (NHWC, NCHW, ...). A channel-contiguous input is read in place. A channel-strided
// input (NCHW) is copied, per block of channels, into a sliding NHWC band on the stack (the kernel rows of
// one output row, zero rows in the padding; nhwc_band.hpp) and each row runs on the band: about one
// transposing move per input value, where gathering every tap lane by lane would cost one load per FMA.
// Its channel-strided output rows are staged the same way (staged_output_row).
template <class Arch, class Chain, class Exec>
void depthwise_conv(const depthwise_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                    const Chain& chain, Exec& exec) {
    const index_t N = out.n(), OH = out.h();
    if (in.stride(1) == 1) {
        exec.parallel_for(N * OH, [&](index_t t) { depthwise_row<Arch>(P, in, out, chain, t / OH, t % OH); });
        return;
    }
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    const index_t W = in.w(), rows = (P.kh - 1) * P.dh + 1;
    const index_t block = std::max<index_t>(S, band_capacity_floats / (rows * W) / S * S);  // channels
    const index_t blocks = (P.channels + block - 1) / block, chunks = (OH + band_chunk_rows - 1) / band_chunk_rows;
    exec.parallel_for(N * blocks * chunks, [&](index_t t) {
        const index_t y0 = (t % chunks) * band_chunk_rows, b = (t / chunks) % blocks, n = t / chunks / blocks;
        const index_t c0 = b * block, cb = std::min(block, P.channels - c0);
        alignas(64) float band_storage[band_capacity_floats];
        alignas(64) float stage_storage[band_capacity_floats];
        nhwc_band<Arch> band(band_storage, band_capacity_floats, in, n, c0, rows, cb, 0, in.w());
        // A channel-strided output (NCHW) is staged as an NHWC row of all channels, then transposed.
        const staged_output_row<Arch> stage(stage_storage, out);
        depthwise_plan Q = P;
        Q.channels = cb;
        Q.pt = 0, Q.sh = 0;  // output row y reads band rows 0, dh, 2 dh, ...
        Q.weights = P.weights + (c0 / S) * P.kh * P.kw * S;
        Q.bias = P.bias + c0;
        Q.channel_base = P.channel_base + c0;
        for (index_t y = y0; y < std::min(OH, y0 + band_chunk_rows); ++y) {
            band.slide_to(y * P.sh - P.pt);
            depthwise_row<Arch>(Q, band.view(), stage.target(), chain, n, y);
            stage.flush(n, y, Q.channel_base, cb);
        }
    });
}

// Runs fn(n, c, begin, end) for every channel plane c of every image n: one task per plane, or, when there
// are too few planes to keep the threads busy, `parts_when_few` tasks per plane, each a range of [0, extent)
// (rows, or vectors of a flattened plane). The planar kernels compute each output vector the same way
// whichever task holds it, so the split changes no result.
template <class Exec, class Fn>
void for_each_plane_part(index_t images, index_t channels, index_t extent, index_t parts_when_few, Exec& exec,
                         const Fn& fn) {
    const index_t planes = images * channels;
    const index_t parts = planes >= 4 * index_t(exec.num_threads()) ? 1 : std::max<index_t>(1, parts_when_few);
    const index_t per_part = (extent + parts - 1) / parts;
    exec.parallel_for(planes * parts, [&](index_t t) {
        const index_t k = t % parts, c = (t / parts) % channels, n = t / parts / channels;
        const index_t begin = k * per_part, end = std::min(extent, begin + per_part);
        if (begin < end) fn(n, c, begin, end);
    });
}

}  // namespace opfuse::detail
