// Linear as a GEMM over register tiles (design.md §3): C[M][N] = A[M][K] . W^T with W packed once into
// panels [N/NR][K][NR] (zero padded past N). A tile is MR rows of A x one panel (NV vectors of output
// channels) and runs the shared micro-kernel detail::accumulate with px[i] = row i of A (unit stride
// along K), i.e. a 1x1 convolution with one tap.
//
// Blocking (all from the shapes only, never from the thread count, so results are bitwise identical for
// any executor):
//   - a task is (block of MC rows of A, one panel of NR output channels): it owns its outputs and runs
//     the whole reduction;
//   - inside a task K is split into KC blocks so that the KC x NR slice of the panel (<= 32 KiB) stays in
//     L1 while every MR-row tile of the block streams over it. Between K blocks the accumulators are
//     parked in a small stack buffer (MC x NR floats, private to the task): never in the output, so an
//     Add epilogue may read a residual that aliases the output. The epilogue chain runs once, on the
//     registers of the last K block, before the single store.
//   - row tails run exact smaller tiles (1..4 rows, then 4-row pieces), so M = 1..5 streams each panel
//     exactly once (the batch-1/GEMV case on wide outputs).
#pragma once

#include <algorithm>

#include "../epilogue/site.hpp"
#include "../kernel/gemm_tile.hpp"
#include "../kernel/vector_io.hpp"

namespace opfuse::detail {

struct gemm_plan {
    index_t K, N;
    index_t panels;        // ceil(N / NR)
    const float* weights;  // [panel][K][NR], zero-padded past N
    const float* bias;     // per output channel, zero-padded to a whole panel
};

// Floats of the per-task stack buffer that parks partial sums between K blocks.
inline constexpr index_t gemm_partial_floats = 6144;  // 24 KiB
// Target size of the KC x NR weight slice kept in L1 (floats).
inline constexpr index_t gemm_l1_slice_floats = 8192;  // 32 KiB

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
    static_for<MR>([&](auto i) { static_for<NV>([&](auto v) { acc[i][v] += odd[i][v]; }); });
}

// Lines the tile asks the memory system for while it computes, so that the next tile finds them in cache
// (the hardware prefetchers do not follow short row segments and jumps between panels): the next tile's
// rows of A (rows x a_lines lines from a_next, row stride lda) into L1, then a share of the next KC x NR
// weight slice (w_lines lines from w_next) into L2.
struct tile_prefetch {
    const float* a_next = nullptr;
    index_t lda = 0, a_rows = 0, a_lines = 0;
    const float* w_next = nullptr;
    index_t w_lines = 0;

    index_t total() const { return a_rows * a_lines + w_lines; }
    // Issues items [from, to) of the list (A lines row by row, then weight lines).
    OPFUSE_ALWAYS_INLINE void issue(index_t from, index_t to) const {
        const index_t na = a_rows * a_lines;
        for (index_t i = from; i < to; ++i) {
            if (i < na) {
                const index_t r = i / a_lines, l = i - r * a_lines;
                __builtin_prefetch(a_next + r * lda + l * 16, 0, 3);
            } else {
                __builtin_prefetch(w_next + (i - na) * 16, 0, 2);
            }
        }
    }
};

// One tile: rows [m, m + MR) of A, panel p, K range [k0, k0 + kl). `partial` holds the tile's running
// sums (MR x NR) between K blocks.
// Compiled as its own function with everything inlined (OPFUSE_TILE_FUNCTION), so the accumulators stay
// in registers whatever the epilogue chain.
template <class Arch, int MR, int NV, class Chain>
OPFUSE_TILE_FUNCTION void gemm_tile(const gemm_plan& P, const TensorView<const float, 2>& a,
                                    const TensorView<float, 2>& c, const Chain& chain, index_t m, index_t p,
                                    index_t k0, index_t kl, float* partial, bool first, bool last,
                                    const tile_prefetch& pf) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    constexpr int NR = NV * S;
    accumulators<Arch, MR, NV> acc;
    if (first)
        zero<Arch, MR, NV>(acc);
    else
        static_for<MR>([&](auto i) {
            static_for<NV>([&](auto v) { acc[i][v] = B::load_aligned(partial + i * NR + v * S); });
        });
    const float* px[MR];
    for (int i = 0; i < MR; ++i) px[i] = a.data() + (m + i) * a.stride(0) + k0;
    const float* w = P.weights + (p * P.K + k0) * NR;
    if constexpr (MR * NV < 8) {
        accumulate_two_sets<Arch, MR, NV>(acc, px, w, kl);
    } else {
        // The shared micro-kernel in steps of `step` k, with the prefetches spread evenly in between.
        constexpr index_t step = 8;
        const index_t items = pf.total(), steps = (kl + step - 1) / step;
        const index_t per_step = (items + steps - 1) / std::max<index_t>(steps, 1);
        index_t issued = 0;
        for (index_t k = 0; k < kl; k += step) {
            const index_t len = std::min(step, kl - k);
            const float* pk[MR];
            for (int i = 0; i < MR; ++i) pk[i] = px[i] + k;
            const index_t next = std::min(items, issued + per_step);
            pf.issue(issued, next);
            issued = next;
            accumulate<Arch, MR, NV, true>(acc, pk, 1, w + k * NR, len);
        }
    }
    if (!last) {
        static_for<MR>([&](auto i) {
            static_for<NV>([&](auto v) { acc[i][v].store_aligned(partial + i * NR + v * S); });
        });
        return;
    }
    const index_t ch0 = p * NR;
    int lanes[NV];
    for (int v = 0; v < NV; ++v) lanes[v] = int(std::clamp<index_t>(P.N - (ch0 + v * S), 0, S));
    static_for<MR>([&](auto i) {
        static_for<NV>([&](auto v) {
            if (lanes[v] <= 0) return;
            const Site s{m + i, 0, 0, ch0 + v * S, lanes[v]};
            acc[i][v] = chain(acc[i][v] + B::load_aligned(P.bias + ch0 + v * S), s);
        });
    });
    static_for<MR>([&](auto i) {
        float* dst = c.data() + (m + i) * c.stride(0) + ch0;
        static_for<NV>([&](auto v) {
            if (lanes[v] > 0) store_channels<Arch>(dst + v * S, 1, lanes[v], acc[i][v]);
        });
    });
}

// Rows [m, m + rows) with rows < MR: exact tiles of 1..4 rows, larger remainders in pieces of 4.
template <class Arch, int NV, class Chain>
void gemm_tail(const gemm_plan& P, const TensorView<const float, 2>& a, const TensorView<float, 2>& c,
               const Chain& chain, index_t m, index_t rows, index_t p, index_t k0, index_t kl, float* partial,
               bool first, bool last, const tile_prefetch& pf) {
    constexpr index_t NR = NV * index_t(xsimd::batch<float, Arch>::size);
    while (rows > 0) {
        const index_t r = std::min<index_t>(rows, 4);
        switch (r) {
            case 4: gemm_tile<Arch, 4, NV>(P, a, c, chain, m, p, k0, kl, partial, first, last, pf); break;
            case 3: gemm_tile<Arch, 3, NV>(P, a, c, chain, m, p, k0, kl, partial, first, last, pf); break;
            case 2: gemm_tile<Arch, 2, NV>(P, a, c, chain, m, p, k0, kl, partial, first, last, pf); break;
            default: gemm_tile<Arch, 1, NV>(P, a, c, chain, m, p, k0, kl, partial, first, last, pf); break;
        }
        m += r, rows -= r, partial += r * NR;
    }
}

template <class Arch, int NV>
struct gemm_blocking {
    static constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    static constexpr index_t NR = NV * S;
    static constexpr index_t MR = tile_shape<Arch>::template mr<NV>;
    static constexpr index_t MC_max = gemm_partial_floats / NR / MR * MR;
    static constexpr index_t KC_max = gemm_l1_slice_floats / NR;

    index_t mc, kc;

    // Balanced blocks: M into ceil(M / MC_max) blocks of whole tiles, K into ceil(K / KC_max) blocks.
    // A matrix that is a single tile (M <= MR, the GEMV case) keeps K whole: nothing is reused from L1.
    gemm_blocking(index_t M, index_t K) {
        const index_t mblocks = (M + MC_max - 1) / MC_max;
        const index_t tiles = (M + MR - 1) / MR;
        mc = std::min(MC_max, (tiles + mblocks - 1) / mblocks * MR);
        if (M <= MR) {
            kc = K;
        } else {
            const index_t kblocks = (K + KC_max - 1) / KC_max;
            kc = (K + kblocks - 1) / kblocks;
        }
    }
};

template <class Arch, int NV, class Chain, class Exec>
void gemm(const gemm_plan& P, const TensorView<const float, 2>& a, const TensorView<float, 2>& c,
          const Chain& chain, Exec& exec) {
    using BL = gemm_blocking<Arch, NV>;
    constexpr index_t MR = BL::MR, NR = BL::NR;
    const index_t M = a.shape(0), K = P.K;
    const BL bl(M, K);
    const index_t mblocks = (M + bl.mc - 1) / bl.mc;
    // Panel-major task order: consecutive tasks share the weight panel (it stays in L2 across M blocks).
    const index_t lda = a.stride(0);
    // Panel-major task order: consecutive tasks share the weight panel (it stays in L2 across M blocks).
    exec.parallel_for(mblocks * P.panels, [&](index_t t) {
        const index_t p = t / mblocks, mb = t % mblocks;
        const index_t m_begin = mb * bl.mc, m_end = std::min(M, m_begin + bl.mc);
        const index_t tiles = (m_end - m_begin + MR - 1) / MR;
        alignas(64) float partial[gemm_partial_floats];  // touched only when K is split
        for (index_t k0 = 0; k0 < K; k0 += bl.kc) {
            const index_t kl = std::min(bl.kc, K - k0);
            const bool first = k0 == 0, last = k0 + kl == K;
            // The weight slice that follows in memory: the next K block of this panel, or the first of the
            // next panel.
            const index_t next_kl = last ? std::min(bl.kc, K) : std::min(bl.kc, K - k0 - kl);
            const float* w_next = P.weights + (p * K + k0 + kl) * NR;
            const index_t w_share = p + 1 < P.panels || !last ? (next_kl * NR / 16 + tiles - 1) / tiles : 0;
            index_t m = m_begin;
            for (index_t j = 0; m < m_end; ++j, m += MR) {
                // The next tile's rows of A: the next MR rows in this K block, or the first rows of the next.
                tile_prefetch pf;
                if (m + MR < m_end) {
                    pf.a_next = a.data() + (m + MR) * lda + k0;
                    pf.a_rows = std::min(MR, m_end - m - MR);
                    pf.a_lines = (kl + 15) / 16 + 1;
                } else if (!last) {
                    pf.a_next = a.data() + m_begin * lda + k0 + kl;
                    pf.a_rows = std::min(MR, m_end - m_begin);
                    pf.a_lines = (next_kl + 15) / 16 + 1;
                }
                pf.lda = lda;
                pf.w_next = w_next + j * w_share * 16;
                pf.w_lines = w_share;
                float* part = partial + (m - m_begin) * NR;
                if (m + MR <= m_end)
                    gemm_tile<Arch, int(MR), NV>(P, a, c, chain, m, p, k0, kl, part, first, last, pf);
                else
                    gemm_tail<Arch, NV>(P, a, c, chain, m, m_end - m, p, k0, kl, part, first, last, pf);
            }
        }
    });
}

}  // namespace opfuse::detail
