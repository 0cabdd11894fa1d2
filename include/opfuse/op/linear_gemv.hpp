// Linear on the row layout W[N][K] (each row zero-padded to a multiple of 16 floats and 64-byte aligned):
// dot products vectorized along K. Used when the output is too narrow for register panels of NR
// channels (padding N to NR would stream mostly zeros: N = 10, 17, ...), in particular the batch-1 GEMV
// of a classifier head with a huge K (DeepFuseNet: N = 10, K = 3211264, 128 MB of weights).
//
// A dot tile is up to 4 rows of A x up to 4 rows of W with one accumulator vector per pair (two per pair
// when the tile is small, to hide the FMA latency); the horizontal sums happen once, after the whole K
// range. Each weight row is read exactly once per group of 4 rows of A. A single row of A (the GEMV)
// reads up to 8 weight rows per tile, split evenly (N = 10: 5 + 5), because more concurrent streams
// keep more of the memory system busy.
//
// The weight rows are software-prefetched `rows_prefetch_floats` ahead into L2 (prefetcht2). One core
// reads DRAM only as fast as its outstanding misses allow, and the L2 hardware prefetcher alone leaves
// it short. DeepFuseNet's head (10 x 3211264, one thread, Zen 4): 17.8 -> 23.5 GB/s in a standalone A/B
// with STREAM copy at 21 GB/s in the same runs (prefetcht0 and prefetchnta were slower; 1024-4096 floats
// ahead measured alike), and 6.7-7.0 -> 5.3-5.9 ms in alternating opfuse_bench runs.
//
// For M <= 4 and a K longer than one chunk, K is split into FIXED-size chunks (a function of the shapes
// only): each chunk is a task writing its partial sums to its own slot, and the partial sums are added in
// chunk order afterwards, so results are bitwise identical for any number of threads. The epilogue chain
// then runs vectorized across N on those sums.
#pragma once

#include <algorithm>

#include "../core/static_for.hpp"
#include "../epilogue/site.hpp"
#include "../kernel/vector_io.hpp"

namespace opfuse::detail {

struct rows_plan {
    index_t K, N;
    index_t ldw;           // row stride of `weights`: K rounded up to 16
    const float* weights;  // [N][ldw], zero-padded
    const float* bias;     // per output channel, zero-padded to a multiple of 64
};

inline constexpr index_t rows_mr = 4;                 // rows of A per dot tile (and the GEMV limit for splitting K)
inline constexpr index_t rows_nr = 4;                 // rows of W per dot tile
inline constexpr index_t rows_nr_gemv = 8;            // rows of W per dot tile when A has one row
inline constexpr index_t rows_prefetch_floats = 2048; // how far ahead each weight row is prefetched
inline constexpr index_t rows_chunk = 16384;          // minimum K chunk (64 KiB of one row) when K is split
inline constexpr index_t rows_partial_floats = 8192;  // stack slots for the chunks' partial sums
inline constexpr index_t rows_block = 64;             // output channels per task when K is not split

// dst[i * ld + j] = sum_{k in [k0, k1)} a[i][k] * w[j][k]. k0 is a multiple of 16; k1 - k0 is a multiple of
// the vector width unless k1 == K (the tail is loaded through a zero-filled stack buffer; W's padding is 0).
template <class Arch, int MR, int NR>
OPFUSE_TILE_FUNCTION void dot_tile(const float* const* a_rows, const float* const* w_rows, index_t k0, index_t k1, float* dst,
              index_t ld) {
    using B = xsimd::batch<float, Arch>;
    const float* a[MR];
    const float* w[NR];
    for (int i = 0; i < MR; ++i) a[i] = a_rows[i];
    for (int j = 0; j < NR; ++j) w[j] = w_rows[j];
    constexpr index_t S = index_t(B::size);
    constexpr int U = MR * NR >= 8 ? 1 : 2;  // independent accumulator sets
    B acc[U][MR][NR];
    static_for<U>([&](auto u) OPFUSE_UNROLLED {
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { static_for<NR>([&](auto j) OPFUSE_UNROLLED { acc[u][i][j] = B(0.f); }); });
    });
    auto step = [&](auto u, index_t k) {
        // One prefetch per 64-byte line of each weight row (every step on AVX-512, every other on AVX2).
        if (S >= 16 || k % 16 == 0)
            static_for<NR>([&](auto j) OPFUSE_UNROLLED { __builtin_prefetch(w[j] + k + rows_prefetch_floats, 0, 1); });
        B av[MR];
        static_for<MR>([&](auto i) OPFUSE_UNROLLED { av[i] = B::load_unaligned(a[i] + k); });
        static_for<NR>([&](auto j) OPFUSE_UNROLLED {
            const B wv = B::load_aligned(w[j] + k);
            static_for<MR>([&](auto i) OPFUSE_UNROLLED { acc[u][i][j] = xsimd::fma(av[i], wv, acc[u][i][j]); });
        });
    };
    index_t k = k0;
    for (; k + U * S <= k1; k += U * S) static_for<U>([&](auto u) OPFUSE_UNROLLED { step(u, k + u * S); });
    for (; k + S <= k1; k += S) step(std::integral_constant<int, 0>{}, k);
    if (k < k1) {
        alignas(64) float tail[MR][S] = {};
        for (int i = 0; i < MR; ++i)
            for (index_t l = 0; l < k1 - k; ++l) tail[i][l] = a[i][k + l];
        static_for<NR>([&](auto j) OPFUSE_UNROLLED {
            const B wv = B::load_aligned(w[j] + k);
            static_for<MR>([&](auto i) OPFUSE_UNROLLED { acc[0][i][j] = xsimd::fma(B::load_aligned(tail[i]), wv, acc[0][i][j]); });
        });
    }
    static_for<MR>([&](auto i) OPFUSE_UNROLLED {
        static_for<NR>([&](auto j) OPFUSE_UNROLLED {
            B s = acc[0][i][j];
            if constexpr (U == 2) s += acc[1][i][j];
            dst[i * ld + j] = xsimd::hadd(s);
        });
    });
}

template <class Arch, int MR>
void dot_row_group(const rows_plan& P, const float* const* a, index_t n0, index_t nrows, index_t k0, index_t k1,
                   float* dst, index_t ld) {
    const float* w[rows_nr_gemv];
    if constexpr (MR == 1) {
        // Tiles of up to 8 rows, as even as possible.
        const index_t tiles = (nrows + rows_nr_gemv - 1) / rows_nr_gemv;
        for (index_t t = 0, j = 0; t < tiles; ++t) {
            const index_t r = (nrows - j) / (tiles - t);
            for (index_t q = 0; q < r; ++q) w[q] = P.weights + (n0 + j + q) * P.ldw;
            switch (r) {
                case 8: dot_tile<Arch, 1, 8>(a, w, k0, k1, dst + j, ld); break;
                case 7: dot_tile<Arch, 1, 7>(a, w, k0, k1, dst + j, ld); break;
                case 6: dot_tile<Arch, 1, 6>(a, w, k0, k1, dst + j, ld); break;
                case 5: dot_tile<Arch, 1, 5>(a, w, k0, k1, dst + j, ld); break;
                case 4: dot_tile<Arch, 1, 4>(a, w, k0, k1, dst + j, ld); break;
                case 3: dot_tile<Arch, 1, 3>(a, w, k0, k1, dst + j, ld); break;
                case 2: dot_tile<Arch, 1, 2>(a, w, k0, k1, dst + j, ld); break;
                default: dot_tile<Arch, 1, 1>(a, w, k0, k1, dst + j, ld); break;
            }
            j += r;
        }
        return;
    }
    index_t j = 0;
    for (; j < nrows; j += rows_nr) {
        const index_t r = std::min(rows_nr, nrows - j);
        for (index_t q = 0; q < r; ++q) w[q] = P.weights + (n0 + j + q) * P.ldw;
        switch (r) {
            case 4: dot_tile<Arch, MR, 4>(a, w, k0, k1, dst + j, ld); break;
            case 3: dot_tile<Arch, MR, 3>(a, w, k0, k1, dst + j, ld); break;
            case 2: dot_tile<Arch, MR, 2>(a, w, k0, k1, dst + j, ld); break;
            default: dot_tile<Arch, MR, 1>(a, w, k0, k1, dst + j, ld); break;
        }
    }
}

// dst[i * ld + j] = dot(A row m0 + i, W row n0 + j) over [k0, k1), for i < mrows <= 4, j < nrows.
template <class Arch>
void dot_block(const rows_plan& P, const TensorView<const float, 2>& a, index_t m0, index_t mrows, index_t n0,
               index_t nrows, index_t k0, index_t k1, float* dst, index_t ld) {
    const float* rows[rows_mr] = {};
    for (index_t i = 0; i < mrows; ++i) rows[i] = a.data() + (m0 + i) * a.stride(0);
    switch (mrows) {
        case 4: dot_row_group<Arch, 4>(P, rows, n0, nrows, k0, k1, dst, ld); break;
        case 3: dot_row_group<Arch, 3>(P, rows, n0, nrows, k0, k1, dst, ld); break;
        case 2: dot_row_group<Arch, 2>(P, rows, n0, nrows, k0, k1, dst, ld); break;
        default: dot_row_group<Arch, 1>(P, rows, n0, nrows, k0, k1, dst, ld); break;
    }
}

// bias + chain over `count` sums of output row m starting at channel n0 (n0 a multiple of S), then store.
template <class Arch, class Chain>
OPFUSE_ALWAYS_INLINE void rows_epilogue(const rows_plan& P, const TensorView<float, 2>& c, const Chain& chain,
                                        index_t m, index_t n0, index_t count, const float* sums) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = index_t(B::size);
    float* dst = c.data() + m * c.stride(0);
    for (index_t j = 0; j < count; j += S) {
        const Site s{m, 0, 0, n0 + j, int(std::min<index_t>(S, count - j))};
        const B v = chain(B::load_aligned(sums + j) + B::load_aligned(P.bias + n0 + j), s);
        store_channels<Arch>(dst + n0 + j, 1, s.lanes, v);
    }
}

// How K is split for a GEMV on the row layout: chunk length and count (count == 1: not split).
struct rows_split {
    index_t chunk = 0, count = 1, npad = 0;
    rows_split(index_t M, index_t N, index_t K, index_t S) {
        npad = (N + S - 1) / S * S;
        chunk = K;
        if (M > rows_mr || K <= rows_chunk || 2 * M * npad > rows_partial_floats) return;
        const index_t max_chunks = rows_partial_floats / (M * npad);
        const index_t want = std::min(max_chunks, (K + rows_chunk - 1) / rows_chunk);
        chunk = ((K + want - 1) / want + 15) / 16 * 16;
        count = (K + chunk - 1) / chunk;
    }
};

template <class Arch, class Chain, class Exec>
void rows_linear(const rows_plan& P, const TensorView<const float, 2>& a, const TensorView<float, 2>& c,
                 const Chain& chain, Exec& exec) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = index_t(B::size);
    const index_t M = a.shape(0), N = P.N, K = P.K;
    const rows_split split(M, N, K, S);

    if (split.count > 1) {
        // partial[chunk][m][npad], summed in chunk order below.
        alignas(64) float partial[rows_partial_floats];
        const index_t slot = M * split.npad;
        exec.parallel_for(split.count, [&](index_t t) {
            const index_t k0 = t * split.chunk, k1 = std::min(K, k0 + split.chunk);
            float* dst = partial + t * slot;
            for (index_t i = 0; i < slot; ++i) dst[i] = 0.f;  // the lanes past N
            dot_block<Arch>(P, a, 0, M, 0, N, k0, k1, dst, split.npad);
        });
        for (index_t m = 0; m < M; ++m) {
            alignas(64) float sums[rows_block] = {};
            for (index_t n0 = 0; n0 < N; n0 += rows_block) {
                const index_t count = std::min(rows_block, N - n0);
                for (index_t j = 0; j < count; j += S) {
                    B v = B::load_aligned(partial + m * split.npad + n0 + j);
                    for (index_t t = 1; t < split.count; ++t)
                        v += B::load_aligned(partial + t * slot + m * split.npad + n0 + j);
                    v.store_aligned(sums + j);
                }
                rows_epilogue<Arch>(P, c, chain, m, n0, count, sums);
            }
        }
        return;
    }

    // Tasks: (group of <= 4 rows of A) x (block of 64 output channels), each over the whole K.
    const index_t mgroups = (M + rows_mr - 1) / rows_mr, nblocks = (N + rows_block - 1) / rows_block;
    exec.parallel_for(mgroups * nblocks, [&](index_t t) {
        const index_t nb = t % nblocks, mg = t / nblocks;
        const index_t m0 = mg * rows_mr, mrows = std::min(rows_mr, M - m0);
        const index_t n0 = nb * rows_block, count = std::min(rows_block, N - n0);
        alignas(64) float sums[rows_mr][rows_block] = {};
        dot_block<Arch>(P, a, m0, mrows, n0, count, 0, K, &sums[0][0], rows_block);
        for (index_t i = 0; i < mrows; ++i) rows_epilogue<Arch>(P, c, chain, m0 + i, n0, count, sums[i]);
    });
}

}  // namespace opfuse::detail
