// Loading and storing one vector of consecutive channels of one pixel, for any tensor strides:
// channel-contiguous tensors (NHWC) use full-width vector moves, channel tails go through a small stack
// buffer (xsimd 8 has no masked moves), channel-strided tensors (NCHW) gather/scatter lane by lane.
#pragma once

#include <cstring>

#include "../core/config.hpp"
#include "../core/tensor.hpp"
#include "../epilogue/site.hpp"

namespace opfuse::detail {

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> load_channels(const float* p, index_t channel_stride, int lanes) {
    using B = xsimd::batch<float, Arch>;
    if (channel_stride == 1 && lanes == int(B::size)) return B::load_unaligned(p);
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
    alignas(64) float tmp[B::size];
    x.store_aligned(tmp);
    if (channel_stride == 1) {
        std::memcpy(p, tmp, sizeof(float) * static_cast<std::size_t>(lanes));
    } else {
        for (int l = 0; l < lanes; ++l) p[l * channel_stride] = tmp[l];
    }
}

template <class Arch>
OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> load_at(const TensorView<const float, 4>& t, const Site& s) {
    // Lanes run along the channels, or along the row for an along_width Site (see site.hpp).
    return load_channels<Arch>(t.data() + t.offset(s.n, s.channel, s.oh, s.ow), s.along_width ? t.stride(3) : t.stride(1),
                               s.lanes);
}

}  // namespace opfuse::detail
