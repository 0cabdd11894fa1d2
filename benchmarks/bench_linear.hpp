// Shared by the Linear entries (bench_linear.cpp) and their oneDNN peers (bench_onednn_linear.cpp): the
// shapes of the anchors' Linear table, the per-shape tensors and the opfuse layers bound to them.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace opfuse_bench {

// C[M][N] = A[M][K] . W^T, W in PyTorch nn.Linear layout [N][K].
struct linear_shape {
    index_t m, n, k;
    std::string name() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
    double flops() const { return 2.0 * double(m) * double(n) * double(k); }
    double bytes() const { return 4.0 * (double(m) * double(k) + double(n) * double(k) + double(m) * double(n)); }
};

inline constexpr linear_shape kGemmShapes[] = {{64, 4096, 1024}, {128, 3072, 768}, {128, 768, 3072}, {256, 256, 256}};
inline constexpr linear_shape kGemvShapes[] = {{1, 1000, 2048}, {1, 10, 3211264}};

// A, C, W and the bias of one shape, seeded random: allocated, first-touched and filled once.
struct linear_data {
    linear_shape shape;
    opfuse::aligned_buffer a, c, w;
    std::vector<float> bias;
    explicit linear_data(const linear_shape& s)
        : shape(s), a(std::size_t(s.m * s.k)), c(std::size_t(s.m * s.n)), w(std::size_t(s.n * s.k)) {
        std::mt19937 g(std::uint32_t(s.m * 31 + s.n * 7 + s.k));
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        const float ws = 1.f / std::sqrt(float(s.k));
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = u(g);
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = u(g) * ws;
        bias.resize(std::size_t(s.n));
        for (auto& b : bias) b = 0.5f * u(g);
    }
    opfuse::TensorView<const float, 2> av() const { return opfuse::matrix<const float>(a.data(), shape.m, shape.k); }
    opfuse::TensorView<float, 2> cv() { return opfuse::matrix(c.data(), shape.m, shape.n); }
    opfuse::Linear::params params() const { return {shape.k, shape.n, {w.data(), w.size()}}; }
};

linear_data& linear_data_for(const linear_shape& s);

enum class linear_kind { linear, bias_gelu_fused, bias_gelu_unfused, bias_fused, bias_unfused };

// One layer bound to its shape's tensors, built once and kept: call(false) runs it serially, call(true)
// on pool2().
using linear_call = std::function<void(bool two_threads)>;
linear_call& linear_call_for(const linear_shape& s, linear_kind k);

void register_linear_benchmarks();
#ifdef OPFUSE_BENCH_ONEDNN
void register_onednn_linear_benchmarks(const linear_shape& s, bool two_threads);
#endif

}  // namespace opfuse_bench
