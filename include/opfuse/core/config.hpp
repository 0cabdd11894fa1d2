// Compile-time configuration: the SIMD architecture and small portability macros.
#pragma once

#include <type_traits>

#include <xsimd/xsimd.hpp>

#if defined(__GNUC__) || defined(__clang__)
#define OPFUSE_ALWAYS_INLINE inline __attribute__((always_inline))
// A register-tile function: compiled on its own with everything it calls inlined (the static_for lambdas,
// the epilogue chain), so that its accumulator array is never forced to memory.
#define OPFUSE_TILE_FUNCTION __attribute__((noinline, flatten))
// On the lambdas of static_for inside a tile: flatten alone does not always inline them (GCC 12 left the
// epilogue's 12x2 loop out of line in gemm_tile, which forced the accumulators to memory: 2.4x slower).
#define OPFUSE_UNROLLED __attribute__((always_inline))
#else
#define OPFUSE_ALWAYS_INLINE inline
#define OPFUSE_TILE_FUNCTION
#define OPFUSE_UNROLLED
#endif

namespace opfuse {

// The architecture chosen by the user's compiler flags (-march=native -> avx512f, -mavx2 -mfma -> fma3<avx2>,
// no flags -> sse2). Kernels take an explicit Arch template parameter so that a program can instantiate a
// second ISA in its own translation unit for runtime dispatch.
using default_arch = xsimd::default_arch;

template <class Arch = default_arch>
using vec = xsimd::batch<float, Arch>;

namespace detail {

// Whether Arch is an x86 ISA whose intrinsics this translation unit can use (SSE2, AVX*, AVX-512): the
// few kernels xsimd 8 has no primitive for (streaming stores, register transposes) are written with them.
template <class Arch>
inline constexpr bool is_x86_simd =
#if XSIMD_WITH_AVX512F
    std::is_base_of_v<xsimd::avx512f, Arch> ||
#endif
#if XSIMD_WITH_AVX
    std::is_base_of_v<xsimd::avx, Arch> ||
#endif
#if XSIMD_WITH_SSE2
    std::is_base_of_v<xsimd::sse2, Arch> ||
#endif
    false;

}  // namespace detail

}  // namespace opfuse
