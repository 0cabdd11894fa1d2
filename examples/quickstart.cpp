// The README's quick start: a fused Conv2d + BatchNorm + ReLU layer on a small NHWC tensor. Lines
// from `using namespace` to the printf are the README's example; the rest checks it against the same
// layer run op by op (exit code 1 if they differ).
#include <opfuse/opfuse.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    using namespace opfuse;
    std::vector<float> x(8 * 8 * 16, 0.5f), y(8 * 8 * 32), w(32 * 16 * 3 * 3, 0.01f);  // NHWC x, y; OIHW w
    std::vector<float> gamma(32, 1.f), beta(32, 0.1f), mean(32, 0.f), var(32, 1.f);
    conv2d_params conv;
    conv.in_channels = 16, conv.out_channels = 32, conv.kernel = 3, conv.padding = 1, conv.weights = w;
    fused<Conv2d, BatchNorm, Relu> layer(conv, {gamma, beta, mean, var}, {});  // packs W, folds BN: once
    layer(nhwc(x.data(), 1, 8, 8, 16), nhwc(y.data(), 1, 8, 8, 32));           // one pass, no temporaries
    std::printf("y[0] = %f\n", y[0]);

    std::vector<float> ref(y.size());
    unfused<Conv2d, BatchNorm, Relu> op_by_op(conv, {gamma, beta, mean, var}, {});
    op_by_op(nhwc(x.data(), 1, 8, 8, 16), nhwc(ref.data(), 1, 8, 8, 32));
    for (std::size_t i = 0; i < y.size(); ++i)
        if (std::fabs(y[i] - ref[i]) > 1e-5f * (1.f + std::fabs(ref[i]))) {
            std::printf("mismatch at %zu: fused %f, op by op %f\n", i, y[i], ref[i]);
            return 1;
        }
    std::printf("fused == op by op (within 1e-5)\n");
    return 0;
}
