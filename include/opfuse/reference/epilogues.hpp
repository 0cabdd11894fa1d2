// Scalar double-precision definitions of every epilogue, written from their mathematical formulas
// (independently of the SIMD code), for the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace opfuse::reference {

inline double relu(double x) { return x > 0 ? x : 0; }
inline double relu6(double x) { return std::min(std::max(x, 0.0), 6.0); }
inline double clamp(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }
inline double leaky_relu(double x, double alpha) { return x >= 0 ? x : alpha * x; }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double silu(double x) { return x * sigmoid(x); }
inline double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_tanh(double x) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double hard_sigmoid(double x, double alpha = 1.0 / 6.0, double beta = 0.5) {
    return clamp(alpha * x + beta, 0.0, 1.0);
}
inline double hard_swish(double x) { return x * relu6(x + 3.0) / 6.0; }
inline double elu(double x, double alpha) { return x > 0 ? x : alpha * (std::exp(x) - 1.0); }
inline double mish(double x) { return x * std::tanh(std::log1p(std::exp(x))); }
inline double batch_norm(double x, double gamma, double beta, double mean, double var, double eps) {
    return (x - mean) / std::sqrt(var + eps) * gamma + beta;
}

}  // namespace opfuse::reference
