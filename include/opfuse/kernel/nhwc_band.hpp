// A window of consecutive input rows of one image, copied from a channel-strided tensor (NCHW, ...) into
// NHWC order [row][column][channel] on the caller's stack, so that channel-vector kernels can run on it.
// Rows outside the image are zeros (the vertical padding, materialised). Sliding the window down keeps
// the rows it already holds (moved with one memmove) and transposes only the new ones: a 3-row window
// that slides by 1 row per output row copies each input row once instead of 3 times.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>

#include "../core/tensor.hpp"
#include "transpose.hpp"

namespace opfuse::detail {

template <class Arch>
class nhwc_band {
public:
    // `data` holds rows * width * channels floats.
    nhwc_band(float* data, index_t rows, index_t width, index_t channels)
        : data_(data), rows_(rows), width_(width), channels_(channels) {}

    // Makes the window hold input rows [top, top + rows) of image n, channels [c0, c0 + channels).
    void slide_to(const TensorView<const float, 4>& in, index_t n, index_t c0, index_t top) {
        const index_t row_floats = width_ * channels_;
        index_t first_new = 0;
        if (top_ != kNone && n == n_ && c0 == c0_ && top >= top_ && top < top_ + rows_) {
            const index_t shift = top - top_;
            std::memmove(data_, data_ + shift * row_floats, sizeof(float) * std::size_t(row_floats * (rows_ - shift)));
            first_new = rows_ - shift;
        }
        for (index_t r = first_new; r < rows_; ++r) copy_row(in, n, c0, top + r, data_ + r * row_floats);
        top_ = top, n_ = n, c0_ = c0;
    }

    // The window as an image of `rows` rows whose row 0 is input row `top`, with `images` images of
    // stride 0 (so that the caller's image index can be used as it is).
    TensorView<const float, 4> view(index_t images) const {
        return {data_, {images, channels_, rows_, width_}, {0, 1, width_ * channels_, channels_}};
    }

private:
    static constexpr index_t kNone = std::numeric_limits<index_t>::min();

    void copy_row(const TensorView<const float, 4>& in, index_t n, index_t c0, index_t ih, float* dst) const {
        if (ih < 0 || ih >= in.h()) {
            std::fill(dst, dst + width_ * channels_, 0.f);
            return;
        }
        const index_t sW = in.stride(3);
        const float* src = in.data() + in.offset(n, c0, ih, 0);
        if (sW == 1) {  // channel planes (rows of `width_` values) to pixels (rows of `channels_` values)
            transpose<Arch>(src, in.stride(1), dst, channels_, channels_, width_);
            return;
        }
        for (index_t c = 0; c < channels_; ++c)
            for (index_t x = 0; x < width_; ++x) dst[x * channels_ + c] = src[c * in.stride(1) + x * sW];
    }

    float* data_;
    index_t rows_, width_, channels_;
    index_t top_ = kNone, n_ = 0, c0_ = 0;
};

}  // namespace opfuse::detail
