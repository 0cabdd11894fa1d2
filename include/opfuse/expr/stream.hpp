// Non-temporal ("streaming") stores: they write whole cache lines to memory without first reading them
// into the cache, which saves the write-allocate read (a third of the traffic of y = f(x, r)) when the
// output is too large to stay in cache anyway. xsimd 8.1 has none, so these use the intrinsics of the
// architecture the batch was compiled for, and fall back to a plain store elsewhere (NEON, scalar).
#pragma once

#include <cstdint>

#include "../core/config.hpp"

#if defined(__SSE2__) || defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#define OPFUSE_HAS_STREAM_STORES 1
#else
#define OPFUSE_HAS_STREAM_STORES 0
#endif

namespace opfuse::expr::detail {

// Whether stream_store<Arch> really bypasses the cache (false: it is a plain store).
template <class Arch>
constexpr bool has_stream_store() {
    constexpr std::size_t bytes = xsimd::batch<float, Arch>::size * sizeof(float);
#if XSIMD_WITH_AVX512F
    if constexpr (bytes == 64) return true;
#endif
#if XSIMD_WITH_AVX
    if constexpr (bytes == 32) return true;
#endif
#if XSIMD_WITH_SSE2
    if constexpr (bytes == 16) return true;
#endif
    return false;
}

// Stores one vector to `p`, which must be aligned to the vector's size (64 bytes for AVX-512).
template <class Arch>
OPFUSE_ALWAYS_INLINE void stream_store(float* p, const xsimd::batch<float, Arch>& v) {
    constexpr std::size_t bytes = xsimd::batch<float, Arch>::size * sizeof(float);
    if constexpr (!has_stream_store<Arch>()) {
        v.store_aligned(p);
    }
#if XSIMD_WITH_AVX512F
    else if constexpr (bytes == 64) {
        _mm512_stream_ps(p, static_cast<__m512>(v));
    }
#endif
#if XSIMD_WITH_AVX
    else if constexpr (bytes == 32) {
        _mm256_stream_ps(p, static_cast<__m256>(v));
    }
#endif
#if XSIMD_WITH_SSE2
    else if constexpr (bytes == 16) {
        _mm_stream_ps(p, static_cast<__m128>(v));
    }
#endif
}

// Orders this thread's streaming stores before whatever it does next (e.g. telling the caller that its
// task is done): they are weakly ordered, unlike ordinary stores.
inline void stream_fence() {
#if OPFUSE_HAS_STREAM_STORES
    _mm_sfence();
#endif
}

// Floats to skip from `p` to reach the next address aligned to `bytes` (0 if already aligned).
inline index_t floats_to_alignment(const float* p, std::size_t bytes) {
    const auto misalign = reinterpret_cast<std::uintptr_t>(p) % bytes;
    return misalign == 0 ? 0 : static_cast<index_t>((bytes - misalign) / sizeof(float));
}

}  // namespace opfuse::expr::detail
