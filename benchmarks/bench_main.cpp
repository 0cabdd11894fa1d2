// opfuse_bench: the shape table, the shared tensors, and main(), which registers the entries in run order:
//   1. peak/...                          this machine's FMA peak and STREAM bandwidth (bench_peak.cpp)
//   2. per shape, 1 thread: conv/<shape>/<pattern>/{fused,unfused}   (bench_opfuse.cpp)
//                           onednn/<shape>/<pattern>                 (bench_onednn.cpp, when dnnl is found)
//   3. per dense shape, 2 threads: the same with a /t2 suffix, bn_relu_folded (and oneDNN bn_relu) only.
//   4. linear/... and onednn_linear/..., 1 then 2 threads (bench_linear.cpp, bench_onednn_linear.cpp)
//   5. the FMA peak again (peak/fma_<isa>@end)
// The expr/... entries register themselves at static initialisation and run first.
// Entries of one shape run back to back so that they see the same clock and bandwidth (this VM drifts).
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "bench_linear.hpp"

namespace opfuse_bench {

const std::vector<conv_shape>& shapes() {
    // name, cin, cout, H=W, k, stride, pad, groups
    static const std::vector<conv_shape> table = {
        {"3x64@224k3", 3, 64, 224, 3, 1, 1, 1},          // first layer
        {"64x64@224k3", 64, 64, 224, 3, 1, 1, 1},
        {"64x64@56k1", 64, 64, 56, 1, 1, 0, 1},
        {"64x64@56k3", 64, 64, 56, 3, 1, 1, 1},
        {"64x256@56k1", 64, 256, 56, 1, 1, 0, 1},
        {"128x128@28k3", 128, 128, 28, 3, 1, 1, 1},
        {"256x256@14k3", 256, 256, 14, 3, 1, 1, 1},
        {"512x512@7k3", 512, 512, 7, 3, 1, 1, 1},
        {"256x512@56k1s2", 256, 512, 56, 1, 2, 0, 1},  // 56x56 in, 28x28 out
        {"dw144@56k3", 144, 144, 56, 3, 1, 1, 144},     // depthwise
        {"dw32@112k3", 32, 32, 112, 3, 1, 1, 32},       // depthwise
    };
    return table;
}

const char* to_string(pattern p) {
    switch (p) {
        case pattern::conv: return "conv";
        case pattern::bias_relu: return "bias_relu";
        case pattern::bn_relu_folded: return "bn_relu_folded";
        case pattern::bn_relu_epilogue: return "bn_relu_epilogue";
        case pattern::bn_add_relu: return "bn_add_relu";
        case pattern::bias_relu6: return "bias_relu6";
    }
    return "?";
}

bool reads_residual(pattern p) { return p == pattern::bn_add_relu; }

std::vector<pattern> patterns_for(const conv_shape& s) {
    std::vector<pattern> ps = {pattern::conv, pattern::bias_relu, pattern::bn_relu_folded, pattern::bn_relu_epilogue,
                               pattern::bn_add_relu};
    if (s.depthwise()) ps.push_back(pattern::bias_relu6);
    return ps;
}

double min_bytes(const conv_shape& s, pattern p) {
    const double elems = double(s.input_size() + s.weight_size() + s.output_size()) +
                         (reads_residual(p) ? double(s.output_size()) : 0.0);
    return elems * sizeof(float);
}

opfuse::TensorView<const float, 4> shape_data::in_view(opfuse::Layout l) const {
    return opfuse::make_view<const float>(in.data(), l, 1, shape.cin, shape.hw, shape.hw);
}
opfuse::TensorView<float, 4> shape_data::out_view(opfuse::Layout l) {
    return opfuse::make_view(out.data(), l, 1, shape.cout, shape.out_hw(), shape.out_hw());
}
opfuse::TensorView<const float, 4> shape_data::residual_view(opfuse::Layout l) const {
    return opfuse::make_view<const float>(residual.data(), l, 1, shape.cout, shape.out_hw(), shape.out_hw());
}

opfuse::conv2d_params shape_data::params(bool fold_batchnorm) const {
    opfuse::conv2d_params p;
    p.in_channels = shape.cin;
    p.out_channels = shape.cout;
    p.kernel = {shape.k, shape.k};
    p.stride = {shape.stride, shape.stride};
    p.padding = opfuse::Padding(shape.pad);
    p.groups = shape.groups;
    p.weights = {weights.data(), weights.size()};
    p.fold_batchnorm = fold_batchnorm;
    return p;
}

shape_data& data_for(const conv_shape& s) {
    static std::map<std::string, std::unique_ptr<shape_data>> cache;
    auto& slot = cache[s.name];
    if (slot) return *slot;
    slot = std::make_unique<shape_data>();
    shape_data& d = *slot;
    d.shape = s;
    // aligned_buffer zero-fills, which first-touches every page here and not in a timed loop.
    d.in = opfuse::aligned_buffer(static_cast<std::size_t>(s.input_size()));
    d.out = opfuse::aligned_buffer(static_cast<std::size_t>(s.output_size()));
    d.residual = opfuse::aligned_buffer(static_cast<std::size_t>(s.output_size()));
    d.weights = opfuse::aligned_buffer(static_cast<std::size_t>(s.weight_size()));
    std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(s.name) & 0x7fffffff));
    std::uniform_real_distribution<float> u(-1.f, 1.f), pos(0.5f, 1.5f), half(-0.5f, 0.5f);
    for (std::size_t i = 0; i < d.in.size(); ++i) d.in[i] = u(rng);
    for (std::size_t i = 0; i < d.residual.size(); ++i) d.residual[i] = u(rng);
    const float wscale = 1.f / std::sqrt(float((s.cin / s.groups) * s.k * s.k));
    for (std::size_t i = 0; i < d.weights.size(); ++i) d.weights[i] = u(rng) * wscale;
    const auto C = static_cast<std::size_t>(s.cout);
    d.bias.resize(C);
    d.gamma.resize(C);
    d.beta.resize(C);
    d.mean.resize(C);
    d.var.resize(C);
    for (std::size_t c = 0; c < C; ++c) {
        d.bias[c] = half(rng);
        d.gamma[c] = pos(rng);
        d.beta[c] = half(rng);
        d.mean[c] = half(rng);
        d.var[c] = pos(rng);
    }
    return d;
}

opfuse::thread_pool& pool2() {
    static opfuse::thread_pool pool(2);
    return pool;
}

void set_conv_counters(benchmark::State& state, const conv_shape& s, pattern p) {
    state.counters["FLOP/s"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bytes/s"] = benchmark::Counter(min_bytes(s, p), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace opfuse_bench

int main(int argc, char** argv) {
    using namespace opfuse_bench;
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("opfuse_simd_arch", xsimd::default_arch::name());
    benchmark::AddCustomContext("opfuse_bench_units",
                                "FLOP/s = 2*MACs of the conv (epilogues not counted); bytes/s = fp32 input + "
                                "weights + output (+ residual) once per call, also for unfused entries");

    register_peak_benchmarks();
    for (const conv_shape& s : shapes()) {
        register_opfuse_benchmarks(s, 1);
#ifdef OPFUSE_BENCH_ONEDNN
        register_onednn_benchmarks(s, 1);
#endif
    }
    for (const conv_shape& s : shapes()) {
        if (s.depthwise()) continue;
        register_opfuse_benchmarks(s, 2);
#ifdef OPFUSE_BENCH_ONEDNN
        register_onednn_benchmarks(s, 2);
#endif
    }
    register_linear_benchmarks();
    register_fma_peak_again();
#ifdef OPFUSE_BENCH_ONEDNN
    add_onednn_context();
#endif

    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
