// Depthwise convolution (groups = in = out channels), NHWC: vectorized over channels, a register tile of
// MR output pixels along one output row. It is bound by loads and memory, not FMAs: each tap is one weight
// vector and MR input vectors. Interior tiles run without checks; tiles touching the padding read a zero
// vector for the taps outside the image.
#pragma once

#include <algorithm>

#include "../core/static_for.hpp"
#include "../kernel/epilogue_tile.hpp"
#include "../kernel/vector_io.hpp"
#include "../epilogue/site.hpp"

namespace opfuse::detail {

struct depthwise_plan {
    index_t channels;
    index_t kh, kw, sh, sw, pt, pl, dh, dw;
    const float* weights;  // packed [channel vector][kh][kw][S], zero-padded past `channels`
    const float* bias;     // per channel, zero-padded
    const float* zeros;    // >= S zeros
};

// Prefetches the input row(s) that the next output row reads for the first time, over this tile's columns
// and channel vector. Depthwise does ~9 FMAs per input load, so it runs at the speed its loads arrive: the
// hardware prefetcher does not follow the pixel-strided pattern of one channel vector, and without this
// every tile waited on the new row coming from L3 (measured 2x slower).
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
    const index_t c0 = cv * S;
    const float* img = in.data() + n * in.stride(0) + c0;
    const float* wbase = P.weights + cv * P.kh * P.kw * S;
    const int lanes = int(std::min<index_t>(S, P.channels - c0));
    prefetch_next_rows<MR>(P, img, H, W, sH, sW, y, x0);
    accumulators<Arch, MR, 1> acc;
    zero<Arch, MR, 1>(acc);
    for (index_t kh = 0; kh < P.kh; ++kh) {
        const index_t ih = y * P.sh - P.pt + kh * P.dh;
        if (ih < 0 || ih >= H) continue;
        const float* row = img + ih * sH;
        for (index_t kw = 0; kw < P.kw; ++kw) {
            const B w = B::load_aligned(wbase + (kh * P.kw + kw) * S);
            static_for<MR>([&](auto i) {
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
                                [&](int i, int) { return Site{n, y, x0 + std::min(i, valid - 1), c0, lanes}; });
    static_for<MR>([&](auto i) {
        if (int(i) >= valid) return;
        store_channels<Arch>(out.data() + out.offset(n, c0, y, x0 + i), 1, lanes, acc[i][0]);
    });
}

// The common case (dilation 1, KW and SW known at compile time): per kernel row, each input column
// vector is loaded once and feeds every (pixel, tap) pair that reads it, so a tile of MR pixels needs
// (MR-1)*SW+KW loads for MR*KW FMAs instead of one load per FMA.
template <class Arch, int MR, int KW, int SW, bool Inside, bool Full, class Chain>
OPFUSE_TILE_FUNCTION void depthwise_row_tile(const depthwise_plan& P, const TensorView<const float, 4>& in,
                                             const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                             index_t y, index_t x0, int valid, index_t cv) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    constexpr int COLS = (MR - 1) * SW + KW;
    const index_t H = in.h(), W = in.w(), sH = in.stride(2), sW = in.stride(3);
    const index_t c0 = cv * S;
    const float* img = in.data() + n * in.stride(0) + c0;
    const float* wbase = P.weights + cv * P.kh * KW * S;
    const int lanes = int(std::min<index_t>(S, P.channels - c0));
    const index_t iw0 = x0 * SW - P.pl;
    prefetch_next_rows<MR>(P, img, H, W, sH, sW, y, x0);
    accumulators<Arch, MR, 1> acc;
    zero<Arch, MR, 1>(acc);
    for (index_t kh = 0; kh < P.kh; ++kh) {
        const index_t ih = y * P.sh - P.pt + kh * P.dh;
        if (ih < 0 || ih >= H) continue;
        const float* row = img + ih * sH + iw0 * sW;
        B w[KW];
        static_for<KW>([&](auto kw) { w[kw] = B::load_aligned(wbase + (kh * KW + kw) * S); });
        static_for<COLS>([&](auto c) {
            if (!Inside && (iw0 + c < 0 || iw0 + c >= W)) return;  // a padding column adds nothing
            const float* p = row + c * sW;
            const B a = Full ? B::load_unaligned(p) : load_channels<Arch>(p, 1, lanes);
            static_for<KW>([&](auto kw) {
                constexpr int d = decltype(c)::value - decltype(kw)::value;  // = i * SW
                if constexpr (d >= 0 && d % SW == 0 && d / SW < MR) acc[d / SW][0] = xsimd::fma(a, w[kw], acc[d / SW][0]);
            });
        });
    }
    // Epilogue on the whole tile, then the stores. Rows past `valid` (the row's tail) get the Site of the
    // last real pixel, so an epilogue never reads an operand outside the output's extent.
    const int tile_lanes[1] = {lanes};
    apply_epilogue<Arch, MR, 1>(acc, P.bias + c0, chain, tile_lanes,
                                [&](int i, int) { return Site{n, y, x0 + std::min(i, valid - 1), c0, lanes}; });
    static_for<MR>([&](auto i) {
        if (int(i) >= valid) return;
        store_channels<Arch>(out.data() + out.offset(n, c0, y, x0 + i), 1, lanes, acc[i][0]);
    });
}

// Tiles of MR pixels along each output row, all channel vectors of a tile before the next tile.
// Tile(inside, full, n, y, x, valid, cv) computes one tile.
template <class Arch, int MR, class Tile, class Exec>
void depthwise_rows(const depthwise_plan& P, const TensorView<const float, 4>& in,
                    const TensorView<float, 4>& out, Exec& exec, const Tile& tile) {
    constexpr int S = int(xsimd::batch<float, Arch>::size);
    const index_t N = out.n(), OH = out.h(), OW = out.w(), W = in.w();
    const index_t vectors = (P.channels + S - 1) / S, full_vectors = P.channels / S;
    const index_t first_inside = std::min(OW, (P.pl + P.sw - 1) / P.sw);
    const index_t last_reach = W - 1 - (P.kw - 1) * P.dw + P.pl;
    const index_t end_inside = std::clamp<index_t>(last_reach < 0 ? 0 : last_reach / P.sw + 1, first_inside, OW);
    exec.parallel_for(N * OH, [&](index_t t) {
        const index_t n = t / OH, y = t % OH;
        for (index_t x = 0; x < OW; x += MR) {
            const int valid = int(std::min<index_t>(MR, OW - x));
            const bool inside = x >= first_inside && x + MR <= end_inside;
            for (index_t cv = 0; cv < vectors; ++cv) tile(inside, cv < full_vectors, n, y, x, valid, cv);
        }
    });
}

template <class Arch, class Chain, class Exec>
void depthwise_conv(const depthwise_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                    const Chain& chain, Exec& exec) {
    constexpr bool wide = xsimd::batch<float, Arch>::size >= 16;
    auto fast = [&](auto kw, auto sw) {
        constexpr int KW = decltype(kw)::value, SW = decltype(sw)::value, MR = wide ? 14 : 7;
        depthwise_rows<Arch, MR>(P, in, out, exec, [&](bool inside, bool full, index_t n, index_t y, index_t x,
                                                       int valid, index_t cv) {
            if (inside && full)
                depthwise_row_tile<Arch, MR, KW, SW, true, true>(P, in, out, chain, n, y, x, valid, cv);
            else if (full)
                depthwise_row_tile<Arch, MR, KW, SW, false, true>(P, in, out, chain, n, y, x, valid, cv);
            else
                depthwise_row_tile<Arch, MR, KW, SW, false, false>(P, in, out, chain, n, y, x, valid, cv);
        });
    };
    using std::integral_constant;
    if (P.dw == 1 && P.kw == 3 && P.sw == 1) return fast(integral_constant<int, 3>{}, integral_constant<int, 1>{});
    if (P.dw == 1 && P.kw == 3 && P.sw == 2) return fast(integral_constant<int, 3>{}, integral_constant<int, 2>{});
    if (P.dw == 1 && P.kw == 5 && P.sw == 1) return fast(integral_constant<int, 5>{}, integral_constant<int, 1>{});
    if (P.dw == 1 && P.kw == 5 && P.sw == 2) return fast(integral_constant<int, 5>{}, integral_constant<int, 2>{});
    constexpr int MR = wide ? 8 : 4;
    depthwise_rows<Arch, MR>(P, in, out, exec, [&](bool inside, bool full, index_t n, index_t y, index_t x,
                                                   int valid, index_t cv) {
        if (inside && full)
            depthwise_tile<Arch, MR, true, true>(P, in, out, chain, n, y, x, valid, cv);
        else if (full)
            depthwise_tile<Arch, MR, false, true>(P, in, out, chain, n, y, x, valid, cv);
        else
            depthwise_tile<Arch, MR, false, false>(P, in, out, chain, n, y, x, valid, cv);
    });
}

}  // namespace opfuse::detail
