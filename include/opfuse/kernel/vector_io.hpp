// Loading and storing one vector of consecutive channels of one pixel, for any tensor strides:
// channel-contiguous tensors (NHWC) use full-width vector moves; their tails use AVX-512 masked moves,
// elsewhere a small stack buffer (xsimd 8 has no masked moves); channel-strided tensors (NCHW)
// gather/scatter lane by lane.
#pragma once

#include <cstring>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/tensor.hpp"
#include "../epilogue/site.hpp"

#if XSIMD_WITH_AVX512F
#include <immintrin.h>
#endif

namespace opfuse::detail {

template <class Arch>
inline constexpr bool has_masked_moves =
#if XSIMD_WITH_AVX512F
    std::is_base_of_v<xsimd::avx512f, Arch>;
#else
    false;
#endif

// AVX2 and the ISAs built on it in xsimd (fma3<avx2>); AVX-512 targets are not.
template <class Arch>
inline constexpr bool is_avx2_family =
#if XSIMD_WITH_AVX2
    std::is_base_of_v<xsimd::avx2, Arch>;
#else
    false;
#endif

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> load_channels(const float* p, index_t channel_stride, int lanes) {
    using B = xsimd::batch<float, Arch>;
    if (channel_stride == 1 && lanes == int(B::size)) return B::load_unaligned(p);
#if XSIMD_WITH_AVX512F
    if constexpr (has_masked_moves<Arch>) {
        // Masked-off lanes are neither read (no fault past the tensor) nor kept (zero).
        if (channel_stride == 1) return _mm512_maskz_loadu_ps(__mmask16((1u << lanes) - 1), p);
    }
#endif
    alignas(64) float tmp[B::size] = {};
    for (int l = 0; l < lanes; ++l) tmp[l] = p[l * channel_stride];
    return B::load_aligned(tmp);
}

template <class Arch>
OPFUSE_ALWAYS_INLINE void store_channels(float* p, index_t channel_stride, int lanes, xsimd::batch<float, Arch> x) {
    using B = xsimd::batch<float, Arch>;
    if (channel_stride == 1 && lanes == int(B::size)) {
        x.store_unaligned(p);
        return;
    }
#if XSIMD_WITH_AVX512F
    if constexpr (has_masked_moves<Arch>) {
        if (channel_stride == 1) {
            _mm512_mask_storeu_ps(p, __mmask16((1u << lanes) - 1), x);
            return;
        }
    }
#endif
    alignas(64) float tmp[B::size];
    x.store_aligned(tmp);
    if (channel_stride == 1) {
        std::memcpy(p, tmp, sizeof(float) * static_cast<std::size_t>(lanes));
    } else {
        for (int l = 0; l < lanes; ++l) p[l * channel_stride] = tmp[l];
    }
}

// Copies `count` contiguous floats: full vectors, then one partial vector (masked on AVX-512).
template <class Arch>
OPFUSE_ALWAYS_INLINE void copy_floats(const float* from, float* to, index_t count) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = index_t(B::size);
    index_t x = 0;
    for (; x + S <= count; x += S) B::load_unaligned(from + x).store_unaligned(to + x);
    if (x < count) store_channels<Arch>(to + x, 1, int(count - x), load_channels<Arch>(from + x, 1, int(count - x)));
}

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> load_at(const TensorView<const float, 4>& t, const Site& s) {
    // Lanes run along the channels, or along the row for an along_width Site (see site.hpp).
    return load_channels<Arch>(t.data() + t.offset(s.n, s.channel, s.oh, s.ow), s.along_width ? t.stride(3) : t.stride(1),
                               s.lanes);
}

// Pins a loaded vector to a register. GCC folds a load into every FMA that uses its value (one memory
// operand per FMA), which for a vector reused by several FMAs multiplies the loads: the depthwise row
// sweep's input columns feed 3 FMAs each. The empty asm makes the value opaque, so it is loaded once.
template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> in_register(xsimd::batch<float, Arch> v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    auto r = static_cast<typename xsimd::batch<float, Arch>::register_type>(v);
    asm("" : "+v"(r));
    return r;
#else
    return v;
#endif
}

}  // namespace opfuse::detail
