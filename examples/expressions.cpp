// Standalone elementwise expressions (opfuse::expr): the snippets of docs/expressions.md, then the
// anchors' chain y = relu(x * s[c] + t[c] + r) (NHWC, C = 64) fused into one pass vs the same four ops
// as four passes, timed and checked against each other. Options: --small (CI), --threads N, --reps N.
#include <opfuse/expr/expr.hpp>
#include <opfuse/opfuse.hpp>

#include <stdexcept>

#include "example_support.hpp"

using namespace opfuse;

// docs/expressions.md, "A first expression"
void first_expression(const std::vector<float>& x_data, const std::vector<float>& r_data, const std::vector<float>& scale,
                      const std::vector<float>& shift, std::vector<float>& y_data, index_t H, index_t W, index_t C) {
    using namespace opfuse::expr;
    auto x = tensor(nhwc(x_data.data(), 1, H, W, C));  // a tensor operand (a view, not a copy)
    auto r = tensor(nhwc(r_data.data(), 1, H, W, C));
    auto s = per_channel(scale);                        // one value per channel, broadcast
    auto t = per_channel(shift);
    assign(nhwc(y_data.data(), 1, H, W, C), relu(x * s + t + r));  // one pass over x, r and y
}

// docs/expressions.md, "Layouts"
void layouts(const std::vector<float>& a_nchw, const std::vector<float>& b_nhwc, std::vector<float>& y_nchw,
             index_t H, index_t W, index_t C) {
    namespace ex = opfuse::expr;
    const auto a = ex::tensor(nchw(a_nchw.data(), 1, C, H, W));  // NCHW
    const auto b = ex::tensor(nhwc(b_nhwc.data(), 1, H, W, C));  // NHWC, same logical shape (N, C, H, W)
    ex::assign(nchw(y_nchw.data(), 1, C, H, W), ex::sigmoid(a) * b);
}

// docs/expressions.md, "Functions and arithmetic"
void functions(const std::vector<float>& x_data, const std::vector<float>& g_data, std::vector<float>& y_data,
               index_t H, index_t W, index_t C) {
    namespace ex = opfuse::expr;
    const auto x = ex::tensor(nhwc(x_data.data(), 1, H, W, C)), g = ex::tensor(nhwc(g_data.data(), 1, H, W, C));
    const auto y = nhwc(y_data.data(), 1, H, W, C);
    ex::assign(y, ex::gelu(x, GELU::Approximate::tanh) * ex::sigmoid(g));  // a gated GELU
    ex::assign(y, ex::clamp(0.5f * x - 1.f, -1.f, 1.f));                   // numbers on either side
    ex::assign(y, ex::maximum(x, g) / (ex::relu(g) + 1.f));                // lane-wise max, division
    ex::assign(y, ex::apply<LeakyRelu>(x, {0.2f}));                         // any elementwise epilogue
}

// docs/expressions.md, "Threads and stores"
void threads_and_stores(const std::vector<float>& x_data, std::vector<float>& y_data, index_t H, index_t W, index_t C) {
    namespace ex = opfuse::expr;
    const auto x = ex::tensor(nhwc(x_data.data(), 1, H, W, C));
    const auto y = nhwc(y_data.data(), 1, H, W, C);
    thread_pool pool(2);
    ex::assign(y, ex::silu(x), pool);                                // on the pool's threads
    ex::assign(y, ex::silu(x), pool, ex::store_policy::streaming);   // force non-temporal stores
    ex::assign(y, ex::silu(x), ex::store_policy::regular);           // serial, force ordinary stores
}

// docs/expressions.md, "Errors"
bool errors(const std::vector<float>& x_data, std::vector<float>& y_data) {
    namespace ex = opfuse::expr;
    const std::vector<float> s(3, 1.f);  // 3 values, but the tensors have 4 channels
    try {
        ex::assign(nhwc(y_data.data(), 1, 2, 2, 4), ex::tensor(nhwc(x_data.data(), 1, 2, 2, 4)) * ex::per_channel(s));
    } catch (const std::invalid_argument& e) {
        std::printf("%s\n", e.what());  // "... per_channel operand #0 has 3 values but the output ... has C=4 ..."
        return true;
    }
    return false;
}

template <class Exec>
bool run(const example::options& opt, Exec& exec) {
    namespace ex = opfuse::expr;
    const index_t H = opt.small ? 14 : 56, W = H, C = 64;
    const std::size_t n = std::size_t(H * W * C);
    const auto xv = example::random_vector(n, -1.f, 1.f, 1), rv = example::random_vector(n, -1.f, 1.f, 2);
    const auto s = example::random_vector(std::size_t(C), 0.5f, 1.5f, 3), t = example::random_vector(std::size_t(C), -0.5f, 0.5f, 4);
    std::vector<float> y_fused(n), y_unfused(n);

    const auto x = ex::tensor(nhwc(xv.data(), 1, H, W, C)), r = ex::tensor(nhwc(rv.data(), 1, H, W, C));
    const auto S = ex::per_channel(s), T = ex::per_channel(t);
    const auto yf = nhwc(y_fused.data(), 1, H, W, C), yu = nhwc(y_unfused.data(), 1, H, W, C);
    const auto yu_in = ex::tensor(yu);
    const double tf = example::median_ms(opt.reps, [&] { ex::assign(yf, ex::relu(x * S + T + r), exec); });
    const double tu = example::median_ms(opt.reps, [&] {
        ex::assign(yu, x * S, exec);  // the same four ops, one pass each
        ex::assign(yu, yu_in + T, exec);
        ex::assign(yu, yu_in + r, exec);
        ex::assign(yu, ex::relu(yu_in), exec);
    });
    bool ok = example::report("relu(x*s[c] + t[c] + r), 4 passes -> 1", tf, tu, example::max_rel_diff(y_fused, y_unfused), 1e-6);
    const double gbs = 3.0 * double(n) * sizeof(float) / (tf * 1e-3) / 1e9;
    std::printf("%-40s fused: %.1f GB/s (x, r read and y written once)\n", "", gbs);

    // The snippets above, run once on the same data.
    std::vector<float> tmp(n), a_nchw(n);
    first_expression(xv, rv, s, t, tmp, H, W, C);
    ok &= example::max_rel_diff(tmp, y_fused) == 0;
    layouts(xv, rv, a_nchw, H, W, C);
    functions(xv, rv, tmp, H, W, C);
    threads_and_stores(xv, tmp, H, W, C);
    ok &= errors(xv, tmp);
    return ok;
}

int main(int argc, char** argv) {
    const example::options opt = example::parse(argc, argv);
    std::printf("Elementwise expressions, NHWC, %s, %d thread(s), median of %d\n",
                opt.small ? "1x14x14x64 (--small)" : "1x56x56x64", opt.threads, opt.reps);
    return example::run_on_executor(opt, [](const auto& o, auto& exec) { return run(o, exec); },
                                    "results differ");
}
