// ResNet blocks, fused vs unfused (NHWC, batch 1):
//
//   BasicBlock, 64 channels at 56x56:
//     y1 = relu(bn1(conv3x3(x)))                 fused<Conv2d, BatchNorm, Relu>
//     y  = relu(bn2(conv3x3(y1)) + x)            fused<Conv2d, BatchNorm, Add, Relu>   (identity shortcut)
//
//   Bottleneck with a strided projection shortcut, 256 -> 512 channels, 56x56 -> 28x28:
//     a = relu(bn_a(conv1x1 256->128(x)))
//     b = relu(bn_b(conv3x3 128->128 stride 2(a)))
//     p = bn_p(conv1x1 256->512 stride 2(x))      fused<Conv2d, BatchNorm>              (projection)
//     y = relu(bn_c(conv1x1 128->512(b)) + p)     fused<Conv2d, BatchNorm, Add, Relu>
//
// fused<> folds every BatchNorm into the conv's weights and applies Add/Relu on the registers before
// the single store; unfused<> runs the same layers op by op (conv, then one pass per epilogue).
// Prints the median latency of both and checks that they agree. Options: --small (CI: 14x14 images,
// 3 repetitions), --threads N, --reps N.
#include <opfuse/opfuse.hpp>

#include "example_support.hpp"

using namespace opfuse;

namespace {

// Conv2d params: OIHW weights, square kernel, symmetric padding.
conv2d_params conv(index_t cin, index_t cout, index_t k, index_t stride, const std::vector<float>& w) {
    conv2d_params p;
    p.in_channels = cin;
    p.out_channels = cout;
    p.kernel = k;
    p.stride = stride;
    p.padding = k / 2;
    p.weights = w;
    return p;
}

BatchNorm::params bn(const example::bn_stats& s) { return {s.gamma, s.beta, s.mean, s.var, 1e-5f}; }

// The BasicBlock as a type: two layers, each fused or unfused (same constructor and call).
template <template <class...> class Compose>
struct basic_block {
    Compose<Conv2d, BatchNorm, Relu> conv1;
    Compose<Conv2d, BatchNorm, Add, Relu> conv2;
    std::vector<float>& mid;  // conv1's output
    index_t hw, c;

    basic_block(const conv2d_params& p1, const BatchNorm::params& bn1, const conv2d_params& p2,
                const BatchNorm::params& bn2, std::vector<float>& mid_, index_t hw_, index_t c_)
        : conv1(p1, bn1, {}), conv2(p2, bn2, {}, {}), mid(mid_), hw(hw_), c(c_) {}

    template <class Exec>
    void operator()(const std::vector<float>& x, std::vector<float>& y, Exec& exec) const {
        const auto in = nhwc(x.data(), 1, hw, hw, c);
        conv1(in, nhwc(mid.data(), 1, hw, hw, c), exec);
        conv2(nhwc(mid.data(), 1, hw, hw, c), nhwc(y.data(), 1, hw, hw, c), in, exec);  // + x, then relu
    }
};

// The Bottleneck: 1x1 reduce, 3x3 stride 2, 1x1 expand + the stride-2 1x1 projection of the input.
template <template <class...> class Compose>
struct bottleneck {
    Compose<Conv2d, BatchNorm, Relu> a, b;
    Compose<Conv2d, BatchNorm> proj;
    Compose<Conv2d, BatchNorm, Add, Relu> c;
    std::vector<float>&ta, &tb, &tp;  // outputs of a, b and proj
    index_t hw;                       // input size; the block's output is hw / 2

    struct layer {
        conv2d_params conv;
        BatchNorm::params bn;
    };
    bottleneck(const layer& la, const layer& lb, const layer& lp, const layer& lc, std::vector<float>& ta_,
               std::vector<float>& tb_, std::vector<float>& tp_, index_t hw_)
        : a(la.conv, la.bn, {}), b(lb.conv, lb.bn, {}), proj(lp.conv, lp.bn), c(lc.conv, lc.bn, {}, {}),
          ta(ta_), tb(tb_), tp(tp_), hw(hw_) {}

    template <class Exec>
    void operator()(const std::vector<float>& x, std::vector<float>& y, Exec& exec) const {
        const index_t o = hw / 2;
        const auto in = nhwc(x.data(), 1, hw, hw, 256);
        a(in, nhwc(ta.data(), 1, hw, hw, 128), exec);
        b(nhwc(ta.data(), 1, hw, hw, 128), nhwc(tb.data(), 1, o, o, 128), exec);
        proj(in, nhwc(tp.data(), 1, o, o, 512), exec);
        c(nhwc(tb.data(), 1, o, o, 128), nhwc(y.data(), 1, o, o, 512), nhwc(tp.data(), 1, o, o, 512), exec);
    }
};

template <class Exec>
bool run(const example::options& opt, Exec& exec) {
    bool ok = true;
    const index_t hw = opt.small ? 14 : 56;
    {
        const index_t c = 64;
        const auto w1 = example::conv_weights(c, c, 3, 3, 1), w2 = example::conv_weights(c, c, 3, 3, 2);
        const example::bn_stats s1(c, 10), s2(c, 20);
        const auto x = example::random_vector(std::size_t(hw * hw * c), -1.f, 1.f, 3);
        std::vector<float> mid(x.size()), y_fused(x.size()), y_unfused(x.size());
        const basic_block<fused> f(conv(c, c, 3, 1, w1), bn(s1), conv(c, c, 3, 1, w2), bn(s2), mid, hw, c);
        const basic_block<unfused> u(conv(c, c, 3, 1, w1), bn(s1), conv(c, c, 3, 1, w2), bn(s2), mid, hw, c);
        const double tf = example::median_ms(opt.reps, [&] { f(x, y_fused, exec); });
        const double tu = example::median_ms(opt.reps, [&] { u(x, y_unfused, exec); });
        ok &= example::report("BasicBlock 64ch", tf, tu, example::max_rel_diff(y_fused, y_unfused));
    }
    {
        const index_t o = hw / 2;
        const auto wa = example::conv_weights(128, 256, 1, 1, 4), wb = example::conv_weights(128, 128, 3, 3, 5);
        const auto wc = example::conv_weights(512, 128, 1, 1, 6), wp = example::conv_weights(512, 256, 1, 1, 7);
        const example::bn_stats sa(128, 30), sb(128, 40), sc(512, 50), sp(512, 60);
        const auto x = example::random_vector(std::size_t(hw * hw * 256), -1.f, 1.f, 8);
        std::vector<float> ta(std::size_t(hw * hw * 128)), tb(std::size_t(o * o * 128)), tp(std::size_t(o * o * 512));
        std::vector<float> y_fused(std::size_t(o * o * 512)), y_unfused(y_fused.size());
        const bottleneck<fused>::layer la{conv(256, 128, 1, 1, wa), bn(sa)}, lb{conv(128, 128, 3, 2, wb), bn(sb)},
            lp{conv(256, 512, 1, 2, wp), bn(sp)}, lc{conv(128, 512, 1, 1, wc), bn(sc)};
        const bottleneck<fused> f(la, lb, lp, lc, ta, tb, tp, hw);
        const bottleneck<unfused> u({la.conv, la.bn}, {lb.conv, lb.bn}, {lp.conv, lp.bn}, {lc.conv, lc.bn}, ta, tb,
                                    tp, hw);
        const double tf = example::median_ms(opt.reps, [&] { f(x, y_fused, exec); });
        const double tu = example::median_ms(opt.reps, [&] { u(x, y_unfused, exec); });
        ok &= example::report("Bottleneck 256->512, stride-2 projection", tf, tu,
                              example::max_rel_diff(y_fused, y_unfused));
    }
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const example::options opt = example::parse(argc, argv);
    std::printf("ResNet blocks, NHWC, batch 1, %s, %d thread(s), median of %d\n",
                opt.small ? "14x14 (--small)" : "56x56", opt.threads, opt.reps);
    return example::run_on_executor(opt, [](const auto& o, auto& exec) { return run(o, exec); },
                                    "fused and unfused results differ");
}
