// Plain scalar reference convolution with double accumulation: the obviously-correct definition the
// tests compare every kernel against. OIHW weights, any strides/padding/dilation/groups, any layout.
#pragma once

#include <vector>

#include "../core/tensor.hpp"
#include "../op/conv2d_geometry.hpp"

namespace opfuse::reference {

// out[n][o][y][x] = sum_{i,kh,kw} in[n][g*Cg+i][y*sh-pt+kh*dh][x*sw-pl+kw*dw] * W[o][i][kh][kw]
// Returns the result in double (N, K, OH, OW) row-major.
inline std::vector<double> conv2d(const conv2d_params& p, const std::vector<float>& weights_oihw,
                                  const TensorView<const float, 4>& in) {
    const auto os = conv2d_output_shape(p, in.n(), in.h(), in.w());
    const index_t N = os[0], K = os[1], OH = os[2], OW = os[3];
    const index_t Cg = p.in_channels / p.groups, Kg = p.out_channels / p.groups;
    const index_t KH = p.kernel.h, KW = p.kernel.w;
    std::vector<double> out(static_cast<std::size_t>(N * K * OH * OW), 0.0);
    for (index_t n = 0; n < N; ++n)
        for (index_t o = 0; o < K; ++o) {
            const index_t g = o / Kg;
            for (index_t y = 0; y < OH; ++y)
                for (index_t x = 0; x < OW; ++x) {
                    double sum = 0;
                    for (index_t i = 0; i < Cg; ++i)
                        for (index_t kh = 0; kh < KH; ++kh)
                            for (index_t kw = 0; kw < KW; ++kw) {
                                const index_t ih = y * p.stride.h - p.padding.top + kh * p.dilation.h;
                                const index_t iw = x * p.stride.w - p.padding.left + kw * p.dilation.w;
                                if (ih < 0 || ih >= in.h() || iw < 0 || iw >= in.w()) continue;
                                const double w = weights_oihw[static_cast<std::size_t>(((o * Cg + i) * KH + kh) * KW + kw)];
                                sum += w * in(n, g * Cg + i, ih, iw);
                            }
                    out[static_cast<std::size_t>(((n * K + o) * OH + y) * OW + x)] = sum;
                }
        }
    return out;
}

}  // namespace opfuse::reference
