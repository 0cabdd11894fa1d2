// Direct convolution of a small channel-strided (NCHW) image with large weights (512 -> 512 @7x7): the row
// band of conv2d_direct.hpp computes one output row at a time, so every row's tiles stream the whole packed
// weights (9.4 MB at 512 @7) from L3 again. Here a task holds a few channel blocks of one image and
// reduces over the input channels in slices:
//   - the whole padded image of one slice of input channels is transposed into an NHWC band on the stack
//     ([row][column][channel], padding materialised as zeros, nhwc_band.hpp);
//   - the tiles run along the flattened output pixels (crossing rows, graded heights: 49 pixels are 9
//     tiles of 5 or 6 on AVX-512), every tap one contiguous segment of the slice, no bounds checks;
//   - a tile's sums are parked between slices (park/unpark keep the FMA order, so results do not depend
//     on the slicing), and the slice's weights of the task's blocks (<= pass_weight_bytes) are read from L2
//     by every tile.
// The output is written once per tile by finish_tile (channel by channel for a planar output).
#pragma once

#include <algorithm>

#include "conv2d_direct.hpp"

namespace opfuse::detail {

// How a layer is cut for image_band_conv: tasks of `blocks_per_task` channel blocks, slices of at most
// `slice` input channels.
struct image_band_cut {
    index_t rows, cols;  // the padded image held by the band
    index_t tiles;       // tiles of one channel block (see for_each_pixel_tile)
    index_t blocks_per_task, slice;
};

template <class Arch, int NV>
image_band_cut image_band_cut_of(const direct_plan& P, const TensorView<const float, 4>& in,
                                 const TensorView<float, 4>& out, int threads) {
    constexpr index_t MR = tile_shape<Arch>::template mr<NV>, NR = NV * index_t(xsimd::batch<float, Arch>::size);
    image_band_cut cut{};
    cut.rows = std::max<index_t>(P.pt + in.h(), (out.h() - 1) * P.sh + (P.kh - 1) * P.dh + 1);
    cut.cols = std::max<index_t>(P.pl + in.w(), (out.w() - 1) * P.sw + (P.kw - 1) * P.dw + 1);
    cut.tiles = (out.h() * out.w() + MR - 1) / MR;  // see for_each_pixel_tile
    const index_t fit_blocks = partial_capacity_floats / (cut.tiles * MR * NR);
    const index_t per_thread = (P.blocks + threads - 1) / threads;
    cut.blocks_per_task = std::min(fit_blocks, per_thread);
    // The slices set the order of the reduction (slice, tap, channel), so they must not depend on the
    // thread count: sized for the most blocks a task can hold, whatever it holds.
    const index_t most_blocks = std::max<index_t>(1, std::min(fit_blocks, P.blocks));
    const index_t weight_bytes_per_channel = most_blocks * P.kh * P.kw * NR * index_t(sizeof(float));
    cut.slice = std::min({P.cin_g, pass_weight_bytes / weight_bytes_per_channel,
                          band_capacity_floats / (cut.rows * cut.cols)});
    return cut;
}

// When this path beats the row band: a channel-strided input whose channel blocks' weights overflow L2
// (the row band then streams them once per row), a reduction long enough for the direct tiles (not the
// first layer), and an image small enough that a block's tiles fit the partial sums and that slices of at
// least 16 channels fit the band.
template <class Arch, int NV>
bool image_band_supports(const direct_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                         int threads) {
    constexpr index_t NR = NV * index_t(xsimd::batch<float, Arch>::size);
    if (in.stride(1) == 1 || short_reduction(P)) return false;
    if (P.kh * P.kw * P.cin_g * NR * index_t(sizeof(float)) <= pass_weight_bytes) return false;
    const image_band_cut cut = image_band_cut_of<Arch, NV>(P, in, out, threads);
    return cut.blocks_per_task >= 1 && cut.slice >= std::min<index_t>(16, P.cin_g);
}

template <class Arch, int NV, class Chain, class Exec>
void image_band_conv(const direct_plan& P, const TensorView<const float, 4>& in, const TensorView<float, 4>& out,
                     const Chain& chain, Exec& exec) {
    constexpr int MR = tile_shape<Arch>::template mr<NV>;
    constexpr index_t NR = NV * index_t(xsimd::batch<float, Arch>::size);
    const image_band_cut cut = image_band_cut_of<Arch, NV>(P, in, out, exec.num_threads());
    const index_t N = out.n(), OH = out.h(), OW = out.w();
    const index_t slices = (P.cin_g + cut.slice - 1) / cut.slice;
    const index_t block_groups = (P.blocks + cut.blocks_per_task - 1) / cut.blocks_per_task;

    exec.parallel_for(N * P.groups * block_groups, [&](index_t t) {
        const index_t bg = t % block_groups, g = (t / block_groups) % P.groups, n = t / block_groups / P.groups;
        const index_t b_begin = bg * cut.blocks_per_task, b_end = std::min(P.blocks, b_begin + cut.blocks_per_task);
        alignas(64) float storage[band_capacity_floats];
        alignas(64) float partial[partial_capacity_floats];
        for (index_t s = 0; s < slices; ++s) {
            // Slices dealt evenly: [c0, c1) of the group's input channels.
            const index_t c0 = P.cin_g * s / slices, c1 = P.cin_g * (s + 1) / slices, len = c1 - c0;
            nhwc_band<Arch> band(storage, band_capacity_floats, in, n, g * P.cin_g + c0, cut.rows, len, -P.pl, cut.cols);
            band.slide_to(-P.pt);
            const float* image = storage;
            const index_t row_floats = cut.cols * len;
            float* slot = partial;
            for (index_t b = b_begin; b < b_end; ++b) {
                const float* wblock = P.weights + (g * P.blocks + b) * P.kh * P.kw * P.cin_g * NR;
                const index_t ch0 = g * P.cout_g + b * NR;
                const bool dense = (b + 1) * NR <= P.cout_g && out.stride(1) == 1;
                index_t pixel = 0;
                for_each_pixel_tile<MR, NV>(OH * OW, [&](auto rows, int valid) OPFUSE_UNROLLED {
                    constexpr int M = decltype(rows)::value;
                    index_t oh[M], ow[M];
                    for (int i = 0; i < M; ++i) {
                        const index_t p = pixel + (i < valid ? i : 0);
                        oh[i] = p / OW, ow[i] = p % OW;
                    }
                    pixel += valid;
                    // Kernel rows that reach the image for some pixel of the tile (the others read zeros).
                    const index_t first_y = oh[0] * P.sh - P.pt, last_y = oh[valid - 1] * P.sh - P.pt;
                    accumulators<Arch, M, NV> acc;
                    if (s > 0)
                        unpark<Arch, M, NV>(acc, slot);
                    else
                        zero<Arch, M, NV>(acc);
                    const float* px[M];
                    for (index_t kh = 0; kh < P.kh; ++kh) {
                        const index_t dy = kh * P.dh;
                        if (last_y + dy < 0 || first_y + dy >= in.h()) continue;
                        for (index_t kw = 0; kw < P.kw; ++kw) {
                            for (int i = 0; i < M; ++i)
                                px[i] = image + (oh[i] * P.sh + dy) * row_floats + (ow[i] * P.sw + kw * P.dw) * len;
                            accumulate<Arch, M, NV, true>(acc, px, 1, wblock + ((kh * P.kw + kw) * P.cin_g + c0) * NR,
                                                          len);
                        }
                    }
                    if (s + 1 < slices) {
                        park<Arch, M, NV>(acc, slot);
                    } else if (dense) {
                        finish_tile<Arch, M, NV, true>(acc, P.bias + ch0, chain, out.data() + out.offset(n, ch0, 0, 0),
                                                       out, n, ch0, oh, ow, valid, P.cout_g - b * NR, P.stream);
                    } else {
                        finish_tile<Arch, M, NV, false>(acc, P.bias + ch0, chain, out.data() + out.offset(n, ch0, 0, 0),
                                                        out, n, ch0, oh, ow, valid, P.cout_g - b * NR, P.stream);
                    }
                    slot += MR * NR;
                });
            }
        }
        if (P.stream) stream_fence();
    });
}

}  // namespace opfuse::detail
