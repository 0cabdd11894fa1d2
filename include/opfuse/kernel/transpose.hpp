// Transposing copies between channel-planar (NCHW) and channel-interleaved (NHWC) rows, for the NCHW paths
// of the convolutions: dst[j][i] = src[i][j] for a rows x cols block, row i of src at src + i*src_stride,
// row j of dst at dst + j*dst_stride. Whole S x S squares go through registers (S = the vector width:
// 16 x 16 on AVX-512, 8 x 8 on AVX, 4 x 4 on SSE; xsimd 8 has no transpose, so they are written with the
// ISA's shuffles), the edges element by element. One square costs ~S*log2(S)+S shuffles for S*S values,
// against one scalar load and store per value.
#pragma once

#include <type_traits>

#include "../core/config.hpp"
#include "../core/tensor.hpp"

#if XSIMD_WITH_SSE2
#include <immintrin.h>
#endif

namespace opfuse::detail {

template <class Arch>
inline constexpr bool has_square_transpose = is_x86_simd<Arch>;

// One S x S square (S = batch<float, Arch>::size); only for has_square_transpose<Arch>. `Stream`: write dst
// with streaming stores (every dst row aligned to the vector size; see stream_store.hpp).
template <class Arch, bool Stream = false>
OPFUSE_ALWAYS_INLINE void transpose_square(const float* src, index_t src_stride, float* dst, index_t dst_stride) {
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        auto put = [](float* p, __m512 v) {
            if constexpr (Stream)
                _mm512_stream_ps(p, v);
            else
                _mm512_storeu_ps(p, v);
        };
        __m512 r[16], t[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
        // Pairs of rows, then quads: u[4k + j] holds, in 128-bit lane L, column 4L + j of rows 4k..4k+3.
        for (int i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        auto lo = [](__m512 a, __m512 b) {
            return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
        };
        auto hi = [](__m512 a, __m512 b) {
            return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
        };
        for (int k = 0; k < 16; k += 4) {
            r[k] = lo(t[k], t[k + 2]);
            r[k + 1] = hi(t[k], t[k + 2]);
            r[k + 2] = lo(t[k + 1], t[k + 3]);
            r[k + 3] = hi(t[k + 1], t[k + 3]);
        }
        // Lane L of the four quads of column j makes output row 4L + j.
        for (int j = 0; j < 4; ++j) {
            const __m512 a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), b = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
            const __m512 c = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE), d = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
            put(dst + j * dst_stride, _mm512_shuffle_f32x4(a, b, 0x88));
            put(dst + (j + 4) * dst_stride, _mm512_shuffle_f32x4(a, b, 0xDD));
            put(dst + (j + 8) * dst_stride, _mm512_shuffle_f32x4(c, d, 0x88));
            put(dst + (j + 12) * dst_stride, _mm512_shuffle_f32x4(c, d, 0xDD));
        }
        return;
    }
#endif
#if XSIMD_WITH_AVX
    if constexpr (std::is_base_of_v<xsimd::avx, Arch>) {
        auto put = [](float* p, __m256 v) {
            if constexpr (Stream)
                _mm256_stream_ps(p, v);
            else
                _mm256_storeu_ps(p, v);
        };
        __m256 r[8], t[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        // r[4k + j] holds, in 128-bit lane L, column 4L + j of rows 4k..4k+3.
        for (int k = 0; k < 8; k += 4) {
            r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
            r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
            r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
            r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
        }
        for (int j = 0; j < 4; ++j) {
            put(dst + j * dst_stride, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));
            put(dst + (j + 4) * dst_stride, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));
        }
        return;
    }
#endif
#if XSIMD_WITH_SSE2
    if constexpr (std::is_base_of_v<xsimd::sse2, Arch>) {
        __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + src_stride);
        __m128 r2 = _mm_loadu_ps(src + 2 * src_stride), r3 = _mm_loadu_ps(src + 3 * src_stride);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        auto put = [](float* p, __m128 v) {
            if constexpr (Stream)
                _mm_stream_ps(p, v);
            else
                _mm_storeu_ps(p, v);
        };
        put(dst, r0);
        put(dst + dst_stride, r1);
        put(dst + 2 * dst_stride, r2);
        put(dst + 3 * dst_stride, r3);
        return;
    }
#endif
    (void)src, (void)src_stride, (void)dst, (void)dst_stride;
}

// dst[j * dst_stride + i] = src[i * src_stride + j] for i < rows, j < cols (unit stride along a row).
// `Stream`: the S x S squares are written with streaming stores (dst and dst_stride aligned to S floats).
template <class Arch, bool Stream = false>
inline void transpose(const float* src, index_t src_stride, float* dst, index_t dst_stride, index_t rows,
                      index_t cols) {
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    index_t i0 = 0;
    if constexpr (has_square_transpose<Arch>) {
        for (; i0 + S <= rows; i0 += S) {
            index_t j = 0;
            for (; j + S <= cols; j += S) transpose_square<Arch, Stream>(src + i0 * src_stride + j, src_stride, dst + j * dst_stride + i0, dst_stride);
            for (; j < cols; ++j)
                for (index_t i = i0; i < i0 + S; ++i) dst[j * dst_stride + i] = src[i * src_stride + j];
        }
    }
    for (index_t i = i0; i < rows; ++i)
        for (index_t j = 0; j < cols; ++j) dst[j * dst_stride + i] = src[i * src_stride + j];
}

}  // namespace opfuse::detail
