// Linear as a GEMM over register tiles (design.md §3): C[M][N] = A[M][K] . W^T with W packed once into
// panels [N/NR][K][NR] (zero padded past N). A tile is MR rows of A x one panel (NV vectors of output
// channels) and runs the shared micro-kernel detail::accumulate with px[i] = row i of A (unit stride
// along K), i.e. a 1x1 convolution with one tap.
//
// Blocking (all from the shapes only, never from the thread count, so results are bitwise identical for
// any executor):
//   - a task is (block of MC rows of A, one panel of NR output channels): it owns its outputs and runs
//     the whole reduction;
//   - K is split into KC blocks only when a K x NR panel would crowd L2 (K > 1536 for NR = 64): each tile
//     streams its KC x NR weight slice from L2 (measured on Zen 5: 90-94 % of peak in cache, while
//     L1-sized slices (KC = 128) lose ~5 % to parking and reloading the accumulators). Between K blocks the
//     accumulators are parked in a stack buffer private to the task (MC x NR floats), never in the
//     output, so an Add epilogue may read a residual that aliases the output. The epilogue chain runs
//     once, after the last K block, on each accumulator vector before its single store (apply_epilogue,
//     shared with the convolutions);
//   - the weights of the next slice / panel are software-prefetched a share per tile while the current
//     slice is in use (the panel that follows comes from DRAM; the hardware prefetcher alone leaves the
//     first tile of every panel waiting on memory), and each tile prefetches its own output lines for
//     writing, and the lines its epilogue reads (Add's residual), before its reduction;
//   - row tails run exact smaller tiles (1..5 rows; a tail of 1..3 rows is merged with the last full tile
//     and split into two balanced tiles), so M = 1..5 streams each panel exactly once (the batch-1 / GEMV
//     case on wide outputs).
#pragma once

#include <algorithm>

#include "../epilogue/chain.hpp"
#include "../epilogue/site.hpp"
#include "../kernel/epilogue_tile.hpp"
#include "../kernel/gemm_tile.hpp"
#include "../kernel/stream_store.hpp"
#include "../kernel/vector_io.hpp"

namespace opfuse::detail {

struct gemm_plan {
    index_t K, N;
    index_t panels;        // ceil(N / NR)
    const float* weights;  // [panel][K][NR], zero-padded past N
    const float* bias;     // per output channel, zero-padded to a whole panel
    bool stream = false;   // write whole panels of C with streaming stores (see stream_store.hpp)
};

// The rows of the GEMM: rows.count() rows; rows.locate<MR>(m) gives, for rows m .. m + MR - 1, where
// row i of A starts (a(i)), where row i of C starts (c(i)) and the epilogue's Site of its vector at
// `channel` (site(i, channel, lanes)).
//
// Linear: rows of two matrices; row m is sample n = m.
struct matrix_rows {
    TensorView<const float, 2> a;
    TensorView<float, 2> c;
    struct tile {
        const matrix_rows& r;
        index_t m;
        OPFUSE_ALWAYS_INLINE const float* a(int i) const { return r.a.data() + (m + i) * r.a.stride(0); }
        OPFUSE_ALWAYS_INLINE float* c(int i) const { return r.c.data() + (m + i) * r.c.stride(0); }
        OPFUSE_ALWAYS_INLINE Site site(int i, index_t channel, int lanes) const { return Site{m + i, 0, 0, channel, lanes}; }
    };
    index_t count() const { return a.shape(0); }
    template <int MR>
    OPFUSE_ALWAYS_INLINE tile locate(index_t m) const {
        return {*this, m};
    }
};

// An unpadded 1x1 convolution over channel-contiguous (NHWC) tensors: row m is output pixel m of the
// images in order, which reads input pixel (oh * stride_h, ow * stride_w). `Packed`: stride 1 and no
// gaps between the pixels, rows and images of either tensor, so the rows of A and C are evenly spaced
// (the common case; the per-row address arithmetic of the general case costs ~6 % at Cin = 64).
template <bool Packed>
struct pixel_rows {
    TensorView<const float, 4> in;  // channel stride 1
    TensorView<float, 4> out;       // channel stride 1
    index_t stride_h, stride_w;
    template <int MR>
    struct tile {
        const pixel_rows& r;
        index_t m, n[MR], oh[MR], ow[MR];
        OPFUSE_ALWAYS_INLINE const float* a(int i) const {
            if constexpr (Packed) return r.in.data() + (m + i) * r.in.stride(3);
            return r.in.data() + n[i] * r.in.stride(0) + oh[i] * r.stride_h * r.in.stride(2) +
                   ow[i] * r.stride_w * r.in.stride(3);
        }
        OPFUSE_ALWAYS_INLINE float* c(int i) const {
            if constexpr (Packed) return r.out.data() + (m + i) * r.out.stride(3);
            return r.out.data() + n[i] * r.out.stride(0) + oh[i] * r.out.stride(2) + ow[i] * r.out.stride(3);
        }
        OPFUSE_ALWAYS_INLINE Site site(int i, index_t channel, int lanes) const {
            return Site{n[i], oh[i], ow[i], channel, lanes};
        }
    };
    index_t count() const { return out.n() * out.h() * out.w(); }
    template <int MR>
    OPFUSE_ALWAYS_INLINE tile<MR> locate(index_t m) const {
        tile<MR> t{*this, m, {}, {}, {}};
        const index_t H = out.h(), W = out.w();
        index_t x = m % W, y = m / W % H, img = m / W / H;
        for (int i = 0; i < MR; ++i) {
            t.n[i] = img, t.oh[i] = y, t.ow[i] = x;
            if (++x == W) x = 0, y = y + 1 == H ? (++img, 0) : y + 1;
        }
        return t;
    }
};

// Floats of the per-task stack buffer that parks partial sums between K blocks.
inline constexpr index_t gemm_partial_floats = 6144;  // 24 KiB
// Largest KC x NR weight slice streamed from L2 by every tile of a block (floats), and largest MC x KC block
// of A kept in L2 across the panels (L2 = 1 MiB per core on Zen 4/5, 1-2 MiB on recent Intel).
inline constexpr index_t gemm_l2_slice_floats = 98304;    // 384 KiB
inline constexpr index_t gemm_l2_a_block_floats = 131072;  // 512 KiB

// How far ahead the tiles with fewer than 8 accumulators prefetch their weights into L2 (prefetcht2).
// Those are the GEMV rows (M = 1..3): all the panels they read are one sequential stream from memory, and
// one core keeps too few misses in flight on it with the hardware prefetcher alone. Measured on Zen 1,
// 1 x 1000 x 2048 (ResNet-50's head, 8 MB of weights, standalone driver, 3 alternating rounds of 5 x 200
// calls): 1 thread median 0.65-0.79 -> 0.58-0.70 ms, min 0.46-0.52 -> 0.39-0.44 ms; 2 threads 5-8 %.
// 4096 and 8192 floats ahead, and prefetcht0 (into L1), gained less.
inline constexpr index_t gemv_prefetch_floats = 2048;

// The micro-kernel for tiles with fewer than 8 accumulators (the GEMV rows M = 1..3 on narrow panels):
// two accumulator sets on alternate k hide the FMA latency, then are added.
template <class Arch, int MR, int NV>
OPFUSE_ALWAYS_INLINE void accumulate_two_sets(accumulators<Arch, MR, NV>& acc, const float* const (&px)[MR],
                                              const float* w, index_t len) {
    constexpr int NR = NV * int(xsimd::batch<float, Arch>::size);
    accumulators<Arch, MR, NV> odd;
    zero<Arch, MR, NV>(odd);
    const float* px1[MR];
    for (int i = 0; i < MR; ++i) px1[i] = px[i] + 1;
    const index_t pairs = len / 2;
    for (index_t k = 0; k < pairs; ++k) {
        // Every line of the weights, gemv_prefetch_floats ahead (see there).
        static_for<(2 * NR + 15) / 16>([&](auto l) OPFUSE_UNROLLED {
            __builtin_prefetch(w + 2 * k * NR + l * 16 + gemv_prefetch_floats, 0, 1);
        });
        const float* p0[MR];
        const float* p1[MR];
        for (int i = 0; i < MR; ++i) p0[i] = px[i] + 2 * k, p1[i] = px1[i] + 2 * k;
        accumulate<Arch, MR, NV, true>(acc, p0, 1, w + 2 * k * NR, 1);
        accumulate<Arch, MR, NV, true>(odd, p1, 1, w + (2 * k + 1) * NR, 1);
    }
    if (len % 2) {
        const float* p0[MR];
        for (int i = 0; i < MR; ++i) p0[i] = px[i] + len - 1;
        accumulate<Arch, MR, NV, true>(acc, p0, 1, w + (len - 1) * NR, 1);
    }
    static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] += odd[i][v]; }); });
}

// The share of the next weight slice (or panel) one tile prefetches, issued a few lines at a time between
// micro-kernel steps. prefetcht0: on Zen 4/5 it measured 5-8 % faster here than prefetcht1/t2.
struct tile_prefetch {
    const float* next = nullptr;
    index_t lines = 0;

    // Tile j's share: lines [j * share, (j + 1) * share) of the `total` lines at `next`.
    static tile_prefetch share_of(const float* next, index_t share, index_t total, index_t j) {
        return {next + j * share * 16, std::max<index_t>(0, std::min(share, total - j * share))};
    }
};

// One tile: rows [m, m + MR) of A, panel p, K range [k0, k0 + kl). `partial` holds the tile's running
// sums (MR x NR) between K blocks; the first K block starts from the bias (start_from_bias).
// Inlined into gemm_tile and gemm_tiles, which are compiled as functions of their own with everything
// inlined (OPFUSE_TILE_FUNCTION), so the accumulators stay in registers whatever the epilogue chain.
template <class Arch, int MR, int NV, class Chain, class Rows, bool FullPanel>
OPFUSE_ALWAYS_INLINE void gemm_tile_body(const gemm_plan& P, const Rows& rows, const Chain& chain, index_t m, index_t p,
                                         index_t k0, index_t kl, float* partial, bool first, bool last,
                                         const tile_prefetch& pf) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    constexpr int NR = NV * S;
    accumulators<Arch, MR, NV> acc;
    if (first)
        start_from_bias<Arch, MR, NV>(acc, P.bias + p * NR);
    else
        unpark<Arch, MR, NV>(acc, partial);
    const float* px[MR];
    const auto at = rows.template locate<MR>(m);
    for (int i = 0; i < MR; ++i) px[i] = at.a(i) + k0;
    const float* w = P.weights + (p * P.K + k0) * NR;
    if constexpr (MR * NV < 8) {
        accumulate_two_sets<Arch, MR, NV>(acc, px, w, kl);
    } else {
        // The shared micro-kernel in steps of `step` k, with the prefetches spread evenly in between.
        constexpr index_t step = 8;
        const index_t steps = (kl + step - 1) / step;
        const index_t per_step = (pf.lines + steps - 1) / std::max<index_t>(steps, 1);
        if (last && !P.stream) {
            // The tile's own output lines, for writing: their read-for-ownership overlaps the reduction.
            for (int i = 0; i < MR; ++i)
                for (int l = 0; l < NR; l += 16) __builtin_prefetch(at.c(i) + p * NR + l, 1, 3);
        }
        if (last) prefetch_operands<NR>(chain, MR, [&](int i, index_t c) { return at.site(i, p * NR + c, 1); });
        index_t issued = 0;
        for (index_t k = 0; k < kl; k += step) {
            const index_t len = std::min(step, kl - k);
            const float* pk[MR];
            for (int i = 0; i < MR; ++i) pk[i] = px[i] + k;
            for (const index_t end = std::min(pf.lines, issued + per_step); issued < end; ++issued)
                __builtin_prefetch(pf.next + issued * 16, 0, 3);
            accumulate<Arch, MR, NV, true>(acc, pk, 1, w + k * NR, len);
        }
    }
    if (!last) {
        park<Arch, MR, NV>(acc, partial);
        return;
    }
    const index_t ch0 = p * NR;
    int lanes[NV];
    // FullPanel: all NR channels are real, known at compile time. Runtime lane counts would keep every
    // operand load (Add) on its channel-tail path, which spills the accumulators (measured +20 % on
    // 1x1 64->64 @56 with BN+Add+ReLU).
    for (int v = 0; v < NV; ++v) lanes[v] = FullPanel ? S : int(std::clamp<index_t>(P.N - (ch0 + v * S), 0, S));
    // The chain on the whole tile (the bias is already in the accumulators; on the registers for cheap
    // chains, through an L1 tile buffer for chains with out-of-line math: see epilogue_tile.hpp), then the
    // stores.
    apply_epilogue<Arch, MR, NV, true>(acc, P.bias + ch0, chain, lanes,
                                 [&](int i, int v) { return at.site(i, ch0 + v * S, lanes[v]); });
    const bool stream = P.stream && lanes[NV - 1] == S;
    static_for<MR>([&](auto i) OPFUSE_UNROLLED {
        float* dst = at.c(i) + ch0;
        static_for<NV>([&](auto v) OPFUSE_UNROLLED {
            if (stream)
                stream_store<Arch>(dst + v * S, acc[i][v]);
            else if (lanes[v] > 0)
                store_channels<Arch>(dst + v * S, 1, lanes[v], acc[i][v]);
        });
    });
}

// One tile (the row tails).
template <class Arch, int MR, int NV, class Chain, class Rows, bool FullPanel = false>
OPFUSE_TILE_FUNCTION void gemm_tile(const gemm_plan& P, const Rows& rows, const Chain& chain, index_t m, index_t p,
                                    index_t k0, index_t kl, float* partial, bool first, bool last,
                                    const tile_prefetch& pf) {
    gemm_tile_body<Arch, MR, NV, Chain, Rows, FullPanel>(P, rows, chain, m, p, k0, kl, partial, first, last, pf);
}

// `count` full tiles from row m on, in one call: a call per tile spilled and reloaded its dozen
// arguments and saved registers every 768 FMAs (1x1 conv at Cin = 64). Tile j prefetches its share of
// the `next_lines` lines at `next` (see gemm).
template <class Arch, int MR, int NV, class Chain, class Rows, bool FullPanel>
OPFUSE_TILE_FUNCTION void gemm_tiles(const gemm_plan& P, const Rows& rows, const Chain& chain, index_t m, index_t count,
                                     index_t p, index_t k0, index_t kl, float* partial, bool first, bool last,
                                     const float* next, index_t share, index_t next_lines) {
    constexpr index_t NR = NV * index_t(xsimd::batch<float, Arch>::size);
    for (index_t j = 0; j < count; ++j, m += MR, partial += MR * NR) {
        const tile_prefetch pf = tile_prefetch::share_of(next, share, next_lines, j);
        gemm_tile_body<Arch, MR, NV, Chain, Rows, FullPanel>(P, rows, chain, m, p, k0, kl, partial, first, last, pf);
    }
}

// Rows [m, m + rows), rows < 2 MR, as balanced tiles of at most 5 rows (5 x 4 vectors = 20 accumulators
// still keep the FMA units busy; a 1-row tile does not). All tiles get the same prefetch share.
template <class Arch, int NV, class Chain, class Rows>
void gemm_tail(const gemm_plan& P, const Rows& where, const Chain& chain, index_t m, index_t rows, index_t p, index_t k0, index_t kl, float* partial,
               bool first, bool last, const tile_prefetch& pf) {
    constexpr index_t NR = NV * index_t(xsimd::batch<float, Arch>::size);
    for (index_t pieces = (rows + 4) / 5; pieces > 0; --pieces) {
        const index_t r = (rows + pieces - 1) / pieces;
        switch (r) {
            case 5: gemm_tile<Arch, 5, NV>(P, where, chain, m, p, k0, kl, partial, first, last, pf); break;
            case 4: gemm_tile<Arch, 4, NV>(P, where, chain, m, p, k0, kl, partial, first, last, pf); break;
            case 3: gemm_tile<Arch, 3, NV>(P, where, chain, m, p, k0, kl, partial, first, last, pf); break;
            case 2: gemm_tile<Arch, 2, NV>(P, where, chain, m, p, k0, kl, partial, first, last, pf); break;
            default: gemm_tile<Arch, 1, NV>(P, where, chain, m, p, k0, kl, partial, first, last, pf); break;
        }
        m += r, rows -= r, partial += r * NR;
    }
}

template <class Arch, int NV>
struct gemm_blocking {
    static constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    static constexpr index_t NR = NV * S;
    static constexpr index_t MR = tile_shape<Arch>::template mr<NV>;
    // Rows of a block when K is split (its partial sums must fit the stack buffer).
    static constexpr index_t MC_split = gemm_partial_floats / NR / MR * MR;
    static constexpr index_t slice_floats() { return gemm_l2_slice_floats; }

    index_t mc, kc;

    // K is split only when a K x NR panel would not leave room in L2 (measured: parking the partial sums
    // and restarting the tile costs ~5 % at KC = 128, so the slices are large and the weights stream
    // from L2). M is cut into balanced blocks of whole tiles whose rows of A (MC x KC) also stay in L2.
    // A matrix that is a single tile (M <= MR, the GEMV case) keeps K whole: nothing is reused.
    gemm_blocking(index_t M, index_t K) {
        const index_t kblocks = M <= MR ? 1 : (K * NR + slice_floats() - 1) / slice_floats();
        kc = (K + kblocks - 1) / kblocks;
        index_t mc_max = std::max(MR, gemm_l2_a_block_floats / kc / MR * MR);
        if (kblocks > 1) mc_max = std::min(mc_max, MC_split);
        const index_t mblocks = (M + mc_max - 1) / mc_max;
        const index_t tiles = (M + MR - 1) / MR;
        mc = (tiles + mblocks - 1) / mblocks * MR;
    }
};

template <class Arch, int NV, class Rows, class Chain, class Exec>
void gemm(const gemm_plan& P, const Rows& rows, const Chain& chain, Exec& exec) {
    using BL = gemm_blocking<Arch, NV>;
    constexpr index_t MR = BL::MR, NR = BL::NR;
    const index_t M = rows.count(), K = P.K;
    const BL bl(M, K);
    const index_t mblocks = (M + bl.mc - 1) / bl.mc;
    // With T threads taking tasks in order, the panel a thread most likely runs next is T panels ahead.
    // (Only a prefetch target: it never changes what is computed.)
    const index_t ahead = std::max<index_t>(1, exec.num_threads());
    // Panel-major task order: consecutive tasks share the weight panel (it stays in L2 across M blocks).
    exec.parallel_for(mblocks * P.panels, [&](index_t t) {
        const index_t p = t / mblocks, mb = t % mblocks;
        const index_t m_begin = mb * bl.mc, m_end = std::min(M, m_begin + bl.mc);
        // Tiles of this block: full MR-row tiles, and a tail that absorbs the last full tile when it would
        // otherwise be 1..3 rows.
        index_t full = (m_end - m_begin) / MR, tail = (m_end - m_begin) % MR;
        if (tail > 0 && tail < 4 && full > 0) --full, tail += MR;
        const index_t tiles = full + (tail + 4) / 5;
        const bool full_panel = (p + 1) * NR <= P.N;
        alignas(64) float partial[gemm_partial_floats];  // touched only when K is split
        for (index_t k0 = 0; k0 < K; k0 += bl.kc) {
            const index_t kl = std::min(bl.kc, K - k0);
            const bool first = k0 == 0, last = k0 + kl == K;
            // Prefetch target: the next K slice of this panel, or the start of the panel run next.
            const bool more = !last || p + ahead < P.panels;
            const float* next = !more ? P.weights : last ? P.weights + (p + ahead) * K * NR : P.weights + (p * K + k0 + kl) * NR;
            const index_t next_lines = last ? std::min(bl.kc, K) * NR / 16 : std::min(bl.kc, K - k0 - kl) * NR / 16;
            const index_t share = more ? (next_lines + tiles - 1) / tiles : 0;
            if (full_panel)
                gemm_tiles<Arch, int(MR), NV, Chain, Rows, true>(P, rows, chain, m_begin, full, p, k0, kl, partial,
                                                                  first, last, next, share, next_lines);
            else
                gemm_tiles<Arch, int(MR), NV, Chain, Rows, false>(P, rows, chain, m_begin, full, p, k0, kl, partial,
                                                                   first, last, next, share, next_lines);
            const index_t m = m_begin + full * MR;
            if (tail > 0) {
                const tile_prefetch pf = tile_prefetch::share_of(next, share, next_lines, full);
                gemm_tail<Arch, NV>(P, rows, chain, m, tail, p, k0, kl, partial + (m - m_begin) * NR, first, last,
                                    pf);
            }
        }
        if (P.stream) stream_fence();
    });
}

}  // namespace opfuse::detail
