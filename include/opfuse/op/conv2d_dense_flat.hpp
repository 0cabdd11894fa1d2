// Dense 3x3 convolution, stride 1, padding 1 ("same"), one group, on dense planar (NCHW) tensors,
// vectorized along the flattened plane: a register tile is MR output channels x NV vectors of 16
// consecutive pixels in row-major order (a vector may run from the end of one row into the next), and
// each step of the reduction (kernel tap, input channel) loads NV vectors of one input plane and
// broadcasts MR weights. AVX-512 only (masked loads).
//
// Why: the NHWC band path moves every input value through a transposing copy and every output value
// back, and on small planes its tiles cannot cross rows; both cost 1.2-1.35x the NHWC time on Zen 5
// (64 @224, 256 @14). Here nothing is copied. (7x7 planes go to conv2d_image_band.hpp instead: see
// dense_flat_supports.) With pixels numbered p = y*W + x, tap (dy, dx) reads p + dy*W + dx, which is
// inside the image exactly when it is a flattened index inside [0, H*W) and the column x + dx is inside
// [0, W): one lane mask per (tap, vector), the same for every input channel, so the masks are computed
// once per task and the inner loop over the channels is branch-free.
// A masked-off lane is never read (no fault before or past the plane) and reads as zero.
//
// The output plane and every operand plane of the chain must have gap-free rows (along_width Sites
// whose lanes continue into the next row); checked by dense_flat_supports.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../core/static_for.hpp"
#include "../epilogue/site.hpp"
#include "../kernel/epilogue_tile.hpp"
#include "../kernel/gemm_tile.hpp"
#include "../kernel/stream_store.hpp"
#include "../kernel/vector_io.hpp"
#include "conv2d_pointwise_planar.hpp"

namespace opfuse::detail {

struct dense_flat_plan {
    index_t cin, cout;
    index_t kh, kw, sh, sw, pt, pl, dh, dw, groups;
    index_t nr;            // lanes of a packed weight block
    const float* weights;  // [block][3][3][cin][nr], zero-padded past cout
    const float* bias;     // zero-padded past cout
    bool stream;           // write the output with streaming stores (stream_store.hpp)
};

inline constexpr index_t dense_flat_mr = 8;             // output channels of a tile
inline constexpr index_t dense_flat_chunk_vectors = 12;  // vectors of a task on large planes (4 tiles of 3)
inline constexpr index_t dense_flat_small_plane = 16;    // planes of at most this many vectors: one chunk
inline constexpr index_t dense_flat_min_vectors = 8;

template <class Arch, class Chain>
bool dense_flat_supports(const dense_flat_plan& P, const TensorView<const float, 4>& in,
                         const TensorView<float, 4>& out, const Chain& chain) {
    if constexpr (!has_masked_moves<Arch>) {
        return false;
    } else {
        if (P.groups != 1 || P.nr % dense_flat_mr != 0) return false;
        // Planes of fewer than 8 vectors (7x7: 4 vectors for 49 pixels) waste lanes and leave only
        // 8 x 2 tiles; there the whole-image band is faster (512 @7: 1.16-1.20 vs 1.5-1.6x the NHWC time).
        if (in.h() * in.w() < dense_flat_min_vectors * 16) return false;
        return same_3x3_on_dense_planes(P, in, out, chain);
    }
}

#if XSIMD_WITH_AVX512F
// Where one output vector of a chunk sits, and which lanes each tap may read.
struct flat_vector {
    index_t q;               // flattened index of its first pixel
    index_t row, col;        // of that pixel
    int lanes;               // real pixels (the plane's last vector may be partial)
    __mmask16 tap_mask[9];   // lanes whose tap (kh, kw) lies inside the image
};

inline flat_vector describe_flat_vector(index_t q, index_t H, index_t W) {
    constexpr index_t S = 16;
    const index_t HW = H * W;
    flat_vector d;
    d.q = q, d.row = q / W, d.col = q % W;
    d.lanes = int(std::min<index_t>(S, HW - q));
    for (int t = 0; t < 9; ++t) d.tap_mask[t] = 0;
    for (index_t l = 0, y = d.row, x = d.col; l < d.lanes; ++l) {
        for (int t = 0; t < 9; ++t) {
            const index_t yy = y + t / 3 - 1, xx = x + t % 3 - 1;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W) d.tap_mask[t] = __mmask16(d.tap_mask[t] | (1u << l));
        }
        if (++x == W) x = 0, ++y;
    }
    return d;
}

// One tile: channels [co0, co0 + MR) x the NV vectors v[0..NV) (consecutive) of image n.
template <class Arch, int NV, class Chain>
OPFUSE_ALWAYS_INLINE void dense_flat_tile(const dense_flat_plan& P, const float* x, index_t plane_in, index_t W,
                                          float* y, index_t plane_out, const Chain& chain, index_t n,
                                          const flat_vector* v, index_t co0) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = 16, MR = int(dense_flat_mr);
    accumulators<Arch, MR, NV> acc;
    zero(acc);
    const float* w = P.weights + (co0 / P.nr * 9 * P.cin) * P.nr + co0 % P.nr;
    for (int t = 0; t < 9; ++t, w += P.cin * P.nr) {
        __mmask16 m[NV];
        // Tap (dy, dx) of the tile's first pixel as an integer: it may lie before the plane, and is
        // only dereferenced through the masks.
        std::uintptr_t at[NV];
        static_for<NV>([&](auto j) OPFUSE_UNROLLED {
            m[j] = v[j].tap_mask[t];
            at[j] = reinterpret_cast<std::uintptr_t>(x) +
                    std::uintptr_t(v[j].q + (t / 3 - 1) * W + (t % 3 - 1)) * sizeof(float);
        });
        const float* wk = w;
        const std::uintptr_t step = std::uintptr_t(plane_in) * sizeof(float);
        for (index_t ci = 0; ci < P.cin; ++ci, wk += P.nr) {
            B xv[NV];
            static_for<NV>([&](auto j) OPFUSE_UNROLLED {
                xv[j] = _mm512_maskz_loadu_ps(m[j], reinterpret_cast<const void*>(at[j]));
                at[j] += step;
            });
            static_for<MR>([&](auto i) OPFUSE_UNROLLED {
                const B a(wk[i]);
                static_for<NV>([&](auto j) OPFUSE_UNROLLED { acc[i][j] = xsimd::fma(a, xv[j], acc[i][j]); });
            });
        }
    }
    const int rows_left = int(std::min<index_t>(MR, P.cout - co0));
    auto finish = [&](int i, int j, B a) OPFUSE_UNROLLED {
        if (i >= rows_left) return;
        const flat_vector& d = v[j];
        const B r = chain(a + B(P.bias[co0 + i]), Site{n, d.row, d.col, co0 + i, d.lanes, true});
        float* p = y + (co0 + i) * plane_out + d.q;
        if (P.stream && d.lanes == S)
            stream_store<Arch>(p, r);
        else
            store_channels<Arch>(p, 1, d.lanes, r);
    };
    for_each_accumulator<Arch, MR, NV, Chain::all_cheap>(acc, finish);
}

// Output channels [c0, c1) x output vectors [v0, v1) of image n. The chunk's vectors are dealt evenly
// over tiles of at most 3 (13 vectors: 3 + 3 + 3 + 2 + 2), and each block of MR channels sweeps them all
// (its weights stay in L1 while the chunk's input is read from L1/L2).
template <class Arch, class Chain>
OPFUSE_TILE_FUNCTION void dense_flat_run(const dense_flat_plan& P, const TensorView<const float, 4>& in,
                                         const TensorView<float, 4>& out, const Chain& chain, index_t n,
                                         index_t c0, index_t c1, index_t v0, index_t v1) {
    constexpr index_t S = 16, most = dense_flat_small_plane;
    const index_t H = in.h(), W = in.w();
    flat_vector vec[most];
    const index_t count = v1 - v0;
    for (index_t k = 0; k < count; ++k) vec[k] = describe_flat_vector((v0 + k) * S, H, W);
    const index_t tiles = (count + 2) / 3;
    const float* x = in.data() + n * in.stride(0);
    float* y = out.data() + n * out.stride(0);
    for (index_t co0 = c0; co0 < c1; co0 += dense_flat_mr) {
        for (index_t k = 0, first = 0; k < tiles; ++k) {
            const index_t size = count / tiles + (k < count % tiles);
            const flat_vector* v = vec + first;
            if (size == 3)
                dense_flat_tile<Arch, 3>(P, x, in.stride(1), W, y, out.stride(1), chain, n, v, co0);
            else if (size == 2)
                dense_flat_tile<Arch, 2>(P, x, in.stride(1), W, y, out.stride(1), chain, n, v, co0);
            else
                dense_flat_tile<Arch, 1>(P, x, in.stride(1), W, y, out.stride(1), chain, n, v, co0);
            first += size;
        }
    }
    if (P.stream) stream_fence();
}

// A task is (image, block of nr output channels, chunk of at most 12 vectors, dealt evenly); a plane of at
// most 16 vectors is one chunk. Tasks do not depend on the thread count, and every output vector is computed the same way.
template <class Arch, class Chain, class Exec>
void dense_flat(const dense_flat_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                const Chain& chain, Exec& exec) {
    static_assert(Chain::pixel_lanes, "the flattened dense kernel needs epilogues that accept along_width Sites");
    constexpr index_t S = 16;
    const index_t vectors = (in.h() * in.w() + S - 1) / S;
    const index_t chunks = vectors <= dense_flat_small_plane ? 1 : (vectors + dense_flat_chunk_vectors - 1) / dense_flat_chunk_vectors;
    const index_t blocks = (P.cout + P.nr - 1) / P.nr;
    exec.parallel_for(out.n() * blocks * chunks, [&](index_t t) {
        const index_t k = t % chunks, b = t / chunks % blocks, n = t / chunks / blocks;
        const index_t v0 = k * vectors / chunks, v1 = (k + 1) * vectors / chunks;  // dealt evenly
        dense_flat_run<Arch>(P, in, out, chain, n, b * P.nr, std::min(P.cout, (b + 1) * P.nr), v0, v1);
    });
}
#endif

}  // namespace opfuse::detail
