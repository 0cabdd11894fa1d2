// Plain scalar reference Linear with double accumulation: the obviously-correct definition the tests
// compare the kernels against. W in PyTorch nn.Linear layout [out][in]; any input row stride.
#pragma once

#include <vector>

#include "../core/tensor.hpp"

namespace opfuse::reference {

// out[m][n] = sum_k in[m][k] * W[n][k] (+ bias[n] when given). Returns double [M][N] row-major.
inline std::vector<double> linear(const TensorView<const float, 2>& in, const std::vector<float>& weights,
                                  index_t out_features, const std::vector<float>& bias = {}) {
    const index_t M = in.shape(0), K = in.shape(1), N = out_features;
    std::vector<double> out(static_cast<std::size_t>(M * N), 0.0);
    for (index_t m = 0; m < M; ++m) {
        const float* a = in.data() + m * in.stride(0);
        for (index_t n = 0; n < N; ++n) {
            const float* w = weights.data() + n * K;
            double sum = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(n)];
            for (index_t k = 0; k < K; ++k) sum += static_cast<double>(a[k * in.stride(1)]) * w[k];
            out[static_cast<std::size_t>(m * N + n)] = sum;
        }
    }
    return out;
}

}  // namespace opfuse::reference
