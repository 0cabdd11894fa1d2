// The register-tile micro-kernel shared by convolution and Linear: MR output pixels x NV vectors of
// output channels, held in MR*NV accumulator registers. One reduction step broadcasts one input value per
// pixel and multiplies it with NV contiguous packed weight vectors:
//     acc[i][v] += broadcast(px[i][k * cs]) * w[k][v]         for k in [0, len)
// The caller chains several such segments (one per kernel tap or row of taps) into one tile, then runs
// the epilogue chain on acc before the single store.
#pragma once

#include "../core/config.hpp"
#include "../core/static_for.hpp"
#include "../core/tensor.hpp"
#include "vector_io.hpp"

namespace opfuse::detail {

// Register tile shapes per vector width, chosen so accumulators + NV weight vectors + one broadcast fit
// the register file: AVX-512 (32 zmm) 6x4, 12x2 or 12x1; AVX2/SSE (16 regs) 6x2 or 8x1, and on AVX2 3x4
// for the reductions where it measured faster (see basic_conv2d: one weight vector becomes a memory operand).
template <class Arch>
struct tile_shape {
    static constexpr int simd = int(xsimd::batch<float, Arch>::size);
    static constexpr bool wide_register_file = simd >= 16;
    static constexpr bool four_vector_tiles = wide_register_file || is_avx2_family<Arch>;
    template <int NV>
    static constexpr int mr = NV == 4 ? (wide_register_file ? 6 : 3) : NV == 2 ? (wide_register_file ? 12 : 6) : (wide_register_file ? 12 : 8);
};

// The first layer (3x3 over 3 channels): kernel-row segments (kw taps of cin_g channels) too short to
// amortize a tile's set-up; the convolutions pick other loop nests and tiles for them.
inline bool short_reduction(index_t kw, index_t cin_g) { return kw * cin_g < 32; }

template <class Arch, int MR, int NV>
using accumulators = xsimd::batch<float, Arch>[MR][NV];

template <class Arch, int MR, int NV>
OPFUSE_ALWAYS_INLINE void zero(accumulators<Arch, MR, NV>& acc) {
    static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] = xsimd::batch<float, Arch>(0.f); }); });
}

// Starts every pixel row of the tile from the bias (NV vectors) instead of zero: the epilogue then skips
// its bias add (apply_epilogue<..., true>), MR*NV adds fewer per tile -- 4 % of the first layer's 27-long
// reductions. The sum is bias + x0*w0 + ... instead of (x0*w0 + ...) + bias: a different rounding, the
// same for every thread count.
template <class Arch, int MR, int NV>
OPFUSE_ALWAYS_INLINE void start_from_bias(accumulators<Arch, MR, NV>& acc, const float* bias) {
    using B = xsimd::batch<float, Arch>;
    static_for<NV>([&](auto v) OPFUSE_UNROLLED {
        const B b = B::load_unaligned(bias + v * int(B::size));
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { acc[i][v] = b; });
    });
}

// Parks the accumulators in / reloads them from `partial` (MR x NV vectors, 64-byte aligned, row-major):
// the running sums of a tile whose reduction is split into passes. Stored and reloaded as floats, the
// FMAs keep the order of the unsplit reduction, so the result is bitwise the same.
template <class Arch, int MR, int NV>
OPFUSE_ALWAYS_INLINE void park(const accumulators<Arch, MR, NV>& acc, float* partial) {
    constexpr int S = int(xsimd::batch<float, Arch>::size);
    static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v].store_aligned(partial + (i * NV + v) * S); }); });
}
template <class Arch, int MR, int NV>
OPFUSE_ALWAYS_INLINE void unpark(accumulators<Arch, MR, NV>& acc, const float* partial) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] = B::load_aligned(partial + (i * NV + v) * S); }); });
}

// `UnitStride` is cs == 1 (channel-contiguous input): the broadcast address is then px[i] + k.
template <class Arch, int MR, int NV, bool UnitStride>
OPFUSE_ALWAYS_INLINE void accumulate(accumulators<Arch, MR, NV>& acc, const float* const (&px)[MR], index_t cs,
                                     const float* w, index_t len) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    for (index_t k = 0; k < len; ++k, w += NV * S) {
        B wv[NV];
        static_for<NV>([&](auto v) OPFUSE_UNROLLED { wv[v] = B::load_aligned(w + v * S); });
        const index_t off = UnitStride ? k : k * cs;
        static_for<MR>([&](auto i) OPFUSE_UNROLLED {
            const B a(px[i][off]);
            static_for<NV>([&](auto v) OPFUSE_UNROLLED { acc[i][v] = xsimd::fma(a, wv[v], acc[i][v]); });
        });
    }
}

}  // namespace opfuse::detail
