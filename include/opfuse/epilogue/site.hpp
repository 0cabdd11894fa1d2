// What an epilogue sees besides the accumulator vector: where that vector sits in the output.
// Lane l of the vector holds output channel `channel + l` of pixel (n, oh, ow); only the first `lanes`
// lanes are real (the rest exist at a channel tail and are never stored).
// With `along_width` set, lane l instead holds the pixel l places after (n, oh, ow) in row-major order,
// of the single channel `channel` (the planar NCHW kernels): pixel (n, oh, ow + l) in the depthwise
// kernel; the 1x1 kernel's vectors may run on into the next row(s), and it only runs when every tensor
// the chain reads has gap-free rows, so the lanes stay evenly spaced in memory. Kernels only do that for chains whose epilogues all declare
// `static constexpr bool pixel_lanes = true;` (every built-in one; see traits.hpp).
#pragma once

#include "../core/tensor.hpp"

namespace opfuse {

struct Site {
    index_t n = 0;
    index_t oh = 0;
    index_t ow = 0;
    index_t channel = 0;
    int lanes = 0;
    bool along_width = false;
};

}  // namespace opfuse
