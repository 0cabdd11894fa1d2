// A transformer MLP block, y = fc2(GELU(fc1(x))), with opfuse::Linear:
//   fused<Linear, BiasAdd, GELU>  fc1   one GEMM kernel, bias + GELU on the accumulator registers
//   fused<Linear, BiasAdd>        fc2   the bias folded into the packed weights
// against the same layers run op by op (unfused<...>: GEMM, then one pass per epilogue). Prints the median
// latency of both and checks that they agree; exits non-zero on a mismatch.
//
//   mlp [--small] [--threads N] [--reps N] [--tokens M]
// Default: 128 tokens, 768 -> 3072 -> 768 (BERT-base). --small: 8 tokens, 64 -> 256 -> 64 (CI).
#include <opfuse/opfuse.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<float> random_vector(std::size_t n, float lo, float hi, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

template <class F>
double median_ms(int reps, F&& f) {
    f();  // warm-up
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto a = std::chrono::steady_clock::now();
        f();
        const auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    using namespace opfuse;
    bool small = false;
    int threads = 1, reps = 20;
    index_t tokens = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") {
            small = true;
        } else if (a == "--threads" && i + 1 < argc) {
            threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--reps" && i + 1 < argc) {
            reps = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--tokens" && i + 1 < argc) {
            tokens = std::max(1, std::atoi(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: %s [--small] [--threads N] [--reps N] [--tokens M]\n", argv[0]);
            return 2;
        }
    }
    const index_t M = tokens ? tokens : small ? 8 : 128;
    const index_t D = small ? 64 : 768, H = small ? 256 : 3072;
    if (small && reps > 3) reps = 3;

    // PyTorch nn.Linear layouts: weight [out][in], bias [out]; scaled so activations stay O(1).
    const auto w1 = random_vector(std::size_t(H * D), -1.f / std::sqrt(float(D)), 1.f / std::sqrt(float(D)), 1);
    const auto b1 = random_vector(std::size_t(H), -0.1f, 0.1f, 2);
    const auto w2 = random_vector(std::size_t(D * H), -1.f / std::sqrt(float(H)), 1.f / std::sqrt(float(H)), 3);
    const auto b2 = random_vector(std::size_t(D), -0.1f, 0.1f, 4);
    const auto x = random_vector(std::size_t(M * D), -1.f, 1.f, 5);

    const Linear::params fc1_p{D, H, w1}, fc2_p{H, D, w2};
    const fused<Linear, BiasAdd, GELU> fc1(fc1_p, BiasAdd::params{b1}, GELU::params{});
    const fused<Linear, BiasAdd> fc2(fc2_p, BiasAdd::params{b2});
    const unfused<Linear, BiasAdd, GELU> fc1_u(fc1_p, BiasAdd::params{b1}, GELU::params{});
    const unfused<Linear, BiasAdd> fc2_u(fc2_p, BiasAdd::params{b2});

    // Buffers allocated (and first touched) once, reused by every call.
    std::vector<float> hidden(std::size_t(M * H)), y(std::size_t(M * D)), hidden_u(hidden.size()), y_u(y.size());
    thread_pool pool(threads);
    const auto X = matrix<const float>(x.data(), M, D);

    auto run_fused = [&] {
        fc1(X, matrix(hidden.data(), M, H), pool);
        fc2(matrix<const float>(hidden.data(), M, H), matrix(y.data(), M, D), pool);
    };
    auto run_unfused = [&] {
        fc1_u(X, matrix(hidden_u.data(), M, H), pool);
        fc2_u(matrix<const float>(hidden_u.data(), M, H), matrix(y_u.data(), M, D), pool);
    };
    const double t_fused = median_ms(reps, run_fused);
    const double t_unfused = median_ms(reps, run_unfused);

    // Fused and unfused round differently only in where the bias is added (folded into the GEMM's bias
    // vector vs a separate pass): they agree to a few ulps of the output's scale.
    double scale = 1, diff = 0;
    for (float v : y_u) scale = std::max(scale, double(std::fabs(v)));
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double d = std::fabs(double(y[i]) - double(y_u[i]));
        if (d > diff || std::isnan(d)) diff = d;
    }
    const double rel = diff / scale, tol = 1e-5;
    const double gflop = 2.0 * double(M) * double(D) * double(H) * 2 * 1e-9;
    std::printf("MLP %ld tokens, %ld -> %ld -> %ld, %d thread(s), median of %d\n", long(M), long(D), long(H),
                long(D), threads, reps);
    std::printf("  fused   %9.3f ms  (%.1f GFLOP/s)\n", t_fused, gflop / t_fused * 1e3);
    std::printf("  unfused %9.3f ms  (%.1f GFLOP/s)   fused speed-up %.2fx\n", t_unfused, gflop / t_unfused * 1e3,
                t_unfused / t_fused);
    std::printf("  max |fused - unfused| / max|y| = %.2e (tolerance %.0e): %s\n", rel, tol,
                rel <= tol ? "ok" : "MISMATCH");
    return rel <= tol ? 0 : 1;
}
