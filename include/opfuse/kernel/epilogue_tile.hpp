// Runs bias + the epilogue chain on a whole register tile, after the last FMA and before any store.
// Cheap chains run on the registers, fully unrolled (per-channel operands loaded once per tile, nothing
// touches memory). Chains with a transcendental (or a user epilogue that did not declare itself cheap)
// stage the tile in L1 and loop over it: ~MR*NV extra L1 moves, but one copy of the chain's code per
// kernel instead of MR*NV inlined copies of exp/erf/tanh.
#pragma once

#include "../core/static_for.hpp"
#include "gemm_tile.hpp"

namespace opfuse::detail {

// site_of(i, v) is the Site of accumulator [i][v]; lanes[v] <= 0 marks a vector past the channel tail.
// `BiasInAccumulators`: the reduction started from the bias (start_from_bias), so it is not added again.
template <class Arch, int MR, int NV, bool BiasInAccumulators = false, class Chain, class SiteOf>
OPFUSE_ALWAYS_INLINE void apply_epilogue(accumulators<Arch, MR, NV>& acc, const float* bias, const Chain& chain,
                                         const int (&lanes)[NV], const SiteOf& site_of) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    if constexpr (Chain::all_cheap) {
        static_for<NV>([&](auto v) OPFUSE_UNROLLED {
            if (lanes[v] <= 0) return;
            if constexpr (BiasInAccumulators) {
                static_for<MR>([&](auto i) OPFUSE_UNROLLED { acc[i][v] = chain(acc[i][v], site_of(int(i), int(v))); });
            } else {
                const B b = B::load_unaligned(bias + v * S);
                static_for<MR>([&](auto i) OPFUSE_UNROLLED { acc[i][v] = chain(acc[i][v] + b, site_of(int(i), int(v))); });
            }
        });
    } else {
        alignas(64) float tile[MR][NV * S];
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v].store_aligned(&tile[i][v * S]); }); });
        for (int v = 0; v < NV; ++v) {
            if (lanes[v] <= 0) continue;
            const B b = BiasInAccumulators ? B(0.f) : B::load_unaligned(bias + v * S);
            for (int i = 0; i < MR; ++i) {
                const B x = chain(B::load_aligned(&tile[i][v * S]) + b, site_of(i, v));
                x.store_aligned(&tile[i][v * S]);
            }
        }
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] = B::load_aligned(&tile[i][v * S]); }); });
    }
}

// Prefetches, for `pixels` pixels of a tile of NR channels, the lines of every tensor its chain reads
// (Add's residual, ...): site_of(i, c) is the Site of pixel i at the tile's c-th channel. Called before the
// reduction, so those loads overlap the FMAs instead of stalling the epilogue: the residual is a whole
// output-sized tensor, usually not in cache, read at a pixel stride the hardware prefetcher does not
// follow. Measured on Zen 1 (BN+Add+ReLU against BN+ReLU): first layer 3->64 @224 1.21-1.25x -> 1.11-1.12x,
// 1x1 64->256 @56 1.39-1.44x -> 1.23-1.30x; dense 3x3 unchanged (its long reduction already hid them).
template <int NR, class Chain, class SiteOf>
OPFUSE_ALWAYS_INLINE void prefetch_operands(const Chain& chain, int pixels, const SiteOf& site_of) {
    if constexpr (Chain::tensor_count > 0) {
        for (int i = 0; i < pixels; ++i)
            for (int c = 0; c < NR; c += 16) chain.prefetch_operands(site_of(i, c));  // one 64-byte line
    }
}

// Calls finish(i, v, acc[i][v]) for every accumulator of a tile whose lanes run along the pixels (the
// planar kernels: each vector has its own channel and Site, so apply_epilogue's per-column bias does not
// fit). Cheap chains: unrolled on the registers; others: looped over an L1 copy of the tile, for the same
// reason as apply_epilogue (one copy of the chain's code instead of MR*NV).
template <class Arch, int MR, int NV, bool Cheap, class Finish>
OPFUSE_ALWAYS_INLINE void for_each_accumulator(accumulators<Arch, MR, NV>& acc, const Finish& finish) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    if constexpr (Cheap) {
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { finish(i, v, acc[i][v]); }); });
    } else {
        alignas(64) float tile[MR][NV * S];
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v].store_aligned(&tile[i][v * S]); }); });
        for (int i = 0; i < MR; ++i)
            for (int v = 0; v < NV; ++v) finish(i, v, B::load_aligned(&tile[i][v * S]));
    }
}

}  // namespace opfuse::detail
