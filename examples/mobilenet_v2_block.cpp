// MobileNetV2 inverted residual block, 24 -> 144 -> 24 channels at 56x56 (NHWC, batch 1), fused vs
// unfused:
//     e = relu6(bn_e(conv1x1 24->144(x)))               fused<Conv2d, BatchNorm, Relu6>   (expand)
//     d = relu6(bn_d(depthwise conv3x3 144(e)))         fused<Conv2d, BatchNorm, Relu6>   (groups = 144)
//     y = bn_p(conv1x1 144->24(d)) + x                  fused<Conv2d, BatchNorm, Add>     (project + residual)
// Prints the median latency of both and checks that they agree. Options: --small (CI: 14x14,
// 3 repetitions), --threads N, --reps N.
#include <opfuse/opfuse.hpp>

#include "example_support.hpp"

using namespace opfuse;

namespace {

conv2d_params conv(index_t cin, index_t cout, index_t k, index_t groups, const std::vector<float>& w) {
    conv2d_params p;
    p.in_channels = cin;
    p.out_channels = cout;
    p.kernel = k;
    p.padding = k / 2;
    p.groups = groups;  // groups == cin == cout: depthwise
    p.weights = w;
    return p;
}

BatchNorm::params bn(const example::bn_stats& s) { return {s.gamma, s.beta, s.mean, s.var, 1e-5f}; }

template <template <class...> class Compose>
struct inverted_residual {
    Compose<Conv2d, BatchNorm, Relu6> expand, depthwise;
    Compose<Conv2d, BatchNorm, Add> project;
    std::vector<float>&e, &d;  // intermediate activations (144 channels)
    index_t hw;

    template <class Exec>
    void operator()(const std::vector<float>& x, std::vector<float>& y, Exec& exec) const {
        const auto in = nhwc(x.data(), 1, hw, hw, 24);
        expand(in, nhwc(e.data(), 1, hw, hw, 144), exec);
        depthwise(nhwc(e.data(), 1, hw, hw, 144), nhwc(d.data(), 1, hw, hw, 144), exec);
        project(nhwc(d.data(), 1, hw, hw, 144), nhwc(y.data(), 1, hw, hw, 24), in, exec);  // + x
    }
};

template <class Exec>
bool run(const example::options& opt, Exec& exec) {
    const index_t hw = opt.small ? 14 : 56;
    const auto we = example::conv_weights(144, 24, 1, 1, 1);
    const auto wd = example::conv_weights(144, 1, 3, 3, 2);  // depthwise: OIHW with I = 1
    const auto wp = example::conv_weights(24, 144, 1, 1, 3);
    const example::bn_stats se(144, 10), sd(144, 20), sp(24, 30);
    const auto x = example::random_vector(std::size_t(hw * hw * 24), -1.f, 1.f, 4);
    std::vector<float> e(std::size_t(hw * hw * 144)), d(e.size()), y_fused(x.size()), y_unfused(x.size());

    const inverted_residual<fused> f{fused<Conv2d, BatchNorm, Relu6>(conv(24, 144, 1, 1, we), bn(se), {}),
                                     fused<Conv2d, BatchNorm, Relu6>(conv(144, 144, 3, 144, wd), bn(sd), {}),
                                     fused<Conv2d, BatchNorm, Add>(conv(144, 24, 1, 1, wp), bn(sp), {}),
                                     e, d, hw};
    const inverted_residual<unfused> u{unfused<Conv2d, BatchNorm, Relu6>(conv(24, 144, 1, 1, we), bn(se), {}),
                                       unfused<Conv2d, BatchNorm, Relu6>(conv(144, 144, 3, 144, wd), bn(sd), {}),
                                       unfused<Conv2d, BatchNorm, Add>(conv(144, 24, 1, 1, wp), bn(sp), {}),
                                       e, d, hw};
    const double tf = example::median_ms(opt.reps, [&] { f(x, y_fused, exec); });
    const double tu = example::median_ms(opt.reps, [&] { u(x, y_unfused, exec); });
    return example::report("inverted residual 24->144->24", tf, tu, example::max_rel_diff(y_fused, y_unfused));
}

}  // namespace

int main(int argc, char** argv) {
    const example::options opt = example::parse(argc, argv);
    std::printf("MobileNetV2 block, NHWC, batch 1, %s, %d thread(s), median of %d\n",
                opt.small ? "14x14 (--small)" : "56x56", opt.threads, opt.reps);
    return example::run_on_executor(opt, [](const auto& o, auto& exec) { return run(o, exec); },
                                    "fused and unfused results differ");
}
