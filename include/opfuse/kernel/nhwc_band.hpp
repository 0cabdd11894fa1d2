// The stack buffers of the convolutions' channel-strided (NCHW) paths. The kernels are built for channel
// vectors, so an NCHW input is copied into NHWC order and an NCHW output is staged in NHWC order:
//   nhwc_band: a window of consecutive input rows and columns of one image, [row][column][channel], with the
//     padding materialised as zeros: rows and columns outside the image. Sliding the window down keeps the
//     rows it already holds and copies (or transposes) only the new ones: a 3-row window that slides by 1
//     row per output row copies each input row once instead of 3 times. The window moves forward through
//     its buffer, so the kept rows are moved (one memmove) only when it reaches the buffer's end: the first
//     layer's 8-row chunks (10 input rows of 678 floats) never move a row.
//   staged_output_row: one output row of all channels, [column][channel], that the tiles store full
//     vectors into and that is then transposed into the channel planes.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>

#include "../core/tensor.hpp"
#include "stream_store.hpp"
#include "transpose.hpp"

namespace opfuse::detail {

// Floats of one stack buffer of the band paths (64 KiB), and output rows per task of those paths: the band
// is copied whole once per chunk, then slides.
inline constexpr index_t band_capacity_floats = 16384;
inline constexpr index_t band_chunk_rows = 8;

template <class Arch>
class nhwc_band {
public:
    // A window of `rows` rows and of the `cols` columns from input column `first_col` (negative: the left
    // padding) over image n of `in`, channels [c0, c0 + channels); columns outside the image are zeros.
    // `data` holds `capacity` floats, at least rows * cols * channels.
    nhwc_band(float* data, index_t capacity, const TensorView<const float, 4>& in, index_t n, index_t c0,
              index_t rows, index_t channels, index_t first_col, index_t cols)
        : data_(data), in_(in), n_(n), c0_(c0), rows_(rows), channels_(channels), first_col_(first_col),
          width_(cols), capacity_rows_(capacity / (cols * channels)) {}

    // Makes the window hold input rows [top, top + rows).
    void slide_to(index_t top) {
        const index_t row_floats = width_ * channels_;
        index_t first_new = 0;
        if (top_ != kNone && top >= top_ && top < top_ + rows_) {
            const index_t shift = top - top_;
            first_new = rows_ - shift;
            if (start_ + shift + rows_ <= capacity_rows_) {
                start_ += shift;
            } else {
                std::memmove(data_, data_ + (start_ + shift) * row_floats, sizeof(float) * std::size_t(row_floats * first_new));
                start_ = 0;
            }
        } else {
            start_ = 0;
        }
        for (index_t r = first_new; r < rows_; ++r) copy_row(top + r, window() + r * row_floats);
        top_ = top;
    }

    // The window as an image of `rows` rows whose row 0 is input row `top`, with n + 1 images of stride 0
    // (so that the caller's image index can be used as it is).
    // Column x of the view is input column first_col + x.
    TensorView<const float, 4> view() const {
        return {window(), {n_ + 1, channels_, rows_, width_}, {0, 1, width_ * channels_, channels_}};
    }

private:
    static constexpr index_t kNone = std::numeric_limits<index_t>::min();

    float* window() const { return data_ + start_ * width_ * channels_; }

    void copy_row(index_t ih, float* row) const {
        const index_t W = in_.w();
        if (ih < 0 || ih >= in_.h()) {
            std::fill(row, row + width_ * channels_, 0.f);
            return;
        }
        // Input columns [begin, end) are in the window and in the image.
        const index_t begin = std::clamp<index_t>(first_col_, 0, W), end = std::clamp<index_t>(first_col_ + width_, 0, W);
        float* dst = row + (begin - first_col_) * channels_;
        std::fill(row, dst, 0.f);
        std::fill(dst + (end - begin) * channels_, row + width_ * channels_, 0.f);
        if (end == begin) return;
        const index_t sC = in_.stride(1), sW = in_.stride(3), count = end - begin;
        const float* src = in_.data() + in_.offset(n_, c0_, ih, begin);
        if (sC == 1 && sW == channels_) {  // already [column][channel]
            std::memcpy(dst, src, sizeof(float) * std::size_t(count * channels_));
            return;
        }
        if (sW == 1) {  // channel planes (rows of W values) to pixels (rows of `channels_` values)
            transpose<Arch>(src, sC, dst, channels_, channels_, count);
            return;
        }
        for (index_t c = 0; c < channels_; ++c)
            for (index_t x = 0; x < count; ++x) dst[x * channels_ + c] = src[c * sC + x * sW];
    }

    float* data_;
    const TensorView<const float, 4>& in_;
    index_t n_, c0_, rows_, channels_, first_col_, width_;
    index_t capacity_rows_;  // rows that fit the buffer
    index_t start_ = 0;      // the buffer row that holds the window's first row
    index_t top_ = kNone;
};

// One output row of all channels in NHWC order on the stack, for a channel-strided output with unit
// stride along W whose row fits (enabled()); otherwise the tiles write the output directly.
template <class Arch>
class staged_output_row {
public:
    staged_output_row(float* data, const TensorView<float, 4>& out)
        : out_(out), enabled_(out.stride(1) != 1 && out.stride(3) == 1 && out.w() * out.c() <= band_capacity_floats),
          // Large outputs whose rows start vector-aligned: the transposes write whole lines with streaming
          // stores (no read-for-ownership; the first layer's 12.8 MB output).
          stream_(enabled_ && can_stream<Arch>(out.data(), out.stride(1), out.stride(2), out.stride(0),
                                               out.size() * sizeof(float))),
          staged_(data, {out.n(), out.c(), out.h(), out.w()}, {0, 1, 0, out.c()}) {}

    // Where the tiles store: the stage (any n and row map to it), or the output itself.
    const TensorView<float, 4>& target() const { return enabled_ ? staged_ : out_; }

    // Moves channels [c0, c0 + channels) of columns [x0, x1) (default: all) of the staged row into output
    // row y of image n.
    void flush(index_t n, index_t y, index_t c0, index_t channels, index_t x0 = 0, index_t x1 = -1) const {
        if (!enabled_) return;
        if (x1 < 0) x1 = out_.w();
        float* dst = out_.data() + out_.offset(n, c0, y, x0);
        const float* src = staged_.data() + x0 * out_.c() + c0;
        if (stream_ && x0 % index_t(xsimd::batch<float, Arch>::size) == 0) {
            transpose<Arch, true>(src, out_.c(), dst, out_.stride(1), x1 - x0, channels);
            stream_fence();
        } else {
            transpose<Arch>(src, out_.c(), dst, out_.stride(1), x1 - x0, channels);
        }
    }

private:
    const TensorView<float, 4>& out_;
    bool enabled_, stream_;
    TensorView<float, 4> staged_;
};

}  // namespace opfuse::detail
