// Non-temporal ("streaming") stores: for outputs much larger than the cache they write whole lines
// without reading them first (no read-for-ownership), which is most of the cost of writing a big
// activation tensor. xsimd 8 has none, so they are written per ISA with a plain-store fallback.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"

#if XSIMD_WITH_SSE2
#include <immintrin.h>
#endif

namespace opfuse::detail {

// Outputs at least this large are written with streaming stores (they would not stay in L2 anyway).
inline constexpr std::size_t streaming_threshold_bytes = std::size_t(4) << 20;

template <class Arch>
inline constexpr bool has_stream_store = is_x86_simd<Arch>;

// p must be aligned to the vector size.
template <class Arch>
OPFUSE_ALWAYS_INLINE void stream_store(float* p, xsimd::batch<float, Arch> x) {
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        _mm512_stream_ps(p, x);
        return;
    }
#endif
#if XSIMD_WITH_AVX
    if constexpr (std::is_base_of_v<xsimd::avx, Arch>) {
        _mm256_stream_ps(p, x);
        return;
    }
#endif
#if XSIMD_WITH_SSE2
    if constexpr (std::is_base_of_v<xsimd::sse2, Arch>) {
        _mm_stream_ps(p, x);
        return;
    }
#endif
    x.store_aligned(p);
}

// Orders this thread's streaming stores before what follows (call once per task that used them).
OPFUSE_ALWAYS_INLINE void stream_fence() {
#if XSIMD_WITH_SSE2
    _mm_sfence();
#endif
}

// True when every full-vector store into a channel-contiguous tensor at multiples of S channels lands on
// a vector-aligned address, and the tensor is large enough for streaming to pay off.
template <class Arch>
inline bool can_stream(const float* data, std::int64_t pixel_stride, std::int64_t row_stride,
                       std::int64_t image_stride, std::size_t bytes) {
    constexpr std::int64_t S = std::int64_t(xsimd::batch<float, Arch>::size);
    return has_stream_store<Arch> && bytes >= streaming_threshold_bytes &&
           reinterpret_cast<std::uintptr_t>(data) % (S * sizeof(float)) == 0 && pixel_stride % S == 0 &&
           row_stride % S == 0 && image_stride % S == 0;
}

}  // namespace opfuse::detail
