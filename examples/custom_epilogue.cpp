// A user-written epilogue: Softplus with parameters (PyTorch nn.Softplus(beta, threshold)),
//     y = log(1 + exp(beta * x)) / beta,   or x where beta * x > threshold,
// used in fused<Conv2d, BiasAdd, Softplus> exactly like the library's own epilogues, checked against a
// plain scalar loop, timed against unfused<Conv2d, BiasAdd, Softplus>, and reused in an elementwise
// expression (opfuse::expr::apply<Softplus>). docs/epilogues_custom.md walks through this file.
// Options: --small (CI), --threads N, --reps N.
#include <opfuse/expr/expr.hpp>
#include <opfuse/opfuse.hpp>
#include <opfuse/reference/conv2d.hpp>

#include "example_support.hpp"

// ---- the epilogue: a params struct, a constructor, and apply() on one vector -------------------------
struct Softplus {
    struct params {
        float beta = 1.f;
        float threshold = 20.f;
    };
    explicit Softplus(const params& p) : beta_(p.beta), inv_beta_(1.f / p.beta), threshold_(p.threshold) {
        opfuse::detail::require(p.beta > 0.f, "Softplus: beta must be > 0, got ", p.beta);
    }

    // x holds consecutive output channels of one pixel (s.channel, s.lanes say which); Softplus is
    // elementwise, so it ignores the Site.
    template <class Arch>
    xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const opfuse::Site&) const {
        using B = xsimd::batch<float, Arch>;
        const B bx = x * B(beta_);
        // min() keeps exp() finite on the lanes that take the linear branch anyway
        const B soft = xsimd::log1p(xsimd::exp(xsimd::min(bx, B(threshold_)))) * B(inv_beta_);
        return xsimd::select(bx > B(threshold_), x, soft);
    }

private:
    float beta_, inv_beta_, threshold_;
};

// The same function on one double: the scalar loop the SIMD result is checked against.
double softplus(double x, double beta, double threshold) {
    return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

using namespace opfuse;

template <class Exec>
bool run(const example::options& opt, Exec& exec) {
    const index_t hw = opt.small ? 16 : 56, cin = 16, cout = 32;
    const auto w = example::conv_weights(cout, cin, 3, 3, 1);
    const auto bias = example::random_vector(std::size_t(cout), -0.5f, 0.5f, 2);
    const auto x = example::random_vector(std::size_t(hw * hw * cin), -2.f, 2.f, 3);
    std::vector<float> y_fused(std::size_t(hw * hw * cout)), y_unfused(y_fused.size());

    conv2d_params p;
    p.in_channels = cin;
    p.out_channels = cout;
    p.kernel = 3;
    p.padding = 1;
    p.weights = w;
    const Softplus::params sp{2.f, 10.f};
    fused<Conv2d, BiasAdd, Softplus> layer(p, {bias}, sp);
    unfused<Conv2d, BiasAdd, Softplus> op_by_op(p, {bias}, sp);

    const auto in = nhwc(x.data(), 1, hw, hw, cin);
    const double tf = example::median_ms(opt.reps, [&] { layer(in, nhwc(y_fused.data(), 1, hw, hw, cout), exec); });
    const double tu =
        example::median_ms(opt.reps, [&] { op_by_op(in, nhwc(y_unfused.data(), 1, hw, hw, cout), exec); });
    bool ok = example::report("conv3x3 16->32 + bias + Softplus", tf, tu, example::max_rel_diff(y_fused, y_unfused));

    // The scalar loop: double-precision conv (opfuse::reference), + bias, softplus.
    const std::vector<double> conv_ref = reference::conv2d(p, w, in);  // (N, K, OH, OW) order
    double worst = 0;
    for (index_t c = 0; c < cout; ++c)
        for (index_t i = 0; i < hw * hw; ++i) {
            const double ref = softplus(conv_ref[std::size_t(c * hw * hw + i)] + bias[std::size_t(c)], 2.0, 10.0);
            const double got = y_fused[std::size_t(i * cout + c)];  // NHWC
            worst = std::max(worst, std::fabs(got - ref) / (1.0 + std::fabs(ref)));
        }
    std::printf("%-40s max |fused - scalar loop| / (1 + |ref|) = %.2e %s\n", "", worst, worst <= 1e-5 ? "ok" : "MISMATCH");
    ok &= worst <= 1e-5;

    // The same type in an elementwise expression: z = softplus(y - 1), one pass.
    std::vector<float> z(y_fused.size());
    const auto y = expr::tensor(nhwc(y_fused.data(), 1, hw, hw, cout));
    expr::assign(nhwc(z.data(), 1, hw, hw, cout), expr::apply<Softplus>(y - 1.f, sp), exec);
    double worst_expr = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
        const double ref = softplus(double(y_fused[i]) - 1.0, 2.0, 10.0);
        worst_expr = std::max(worst_expr, std::fabs(z[i] - ref) / (1.0 + std::fabs(ref)));
    }
    std::printf("%-40s max |expr - scalar loop| / (1 + |ref|) = %.2e %s\n", "expr::apply<Softplus>(y - 1)",
                worst_expr, worst_expr <= 1e-5 ? "ok" : "MISMATCH");
    return ok && worst_expr <= 1e-5;
}

int main(int argc, char** argv) {
    const example::options opt = example::parse(argc, argv);
    std::printf("Custom epilogue (Softplus), NHWC, batch 1, %s, %d thread(s), median of %d\n",
                opt.small ? "16x16 (--small)" : "56x56", opt.threads, opt.reps);
    return example::run_on_executor(opt, [](const auto& o, auto& exec) { return run(o, exec); },
                                    "results differ");
}
