// Linear (C = act(A . W^T + b), W in [out][in]) at the shapes of the anchors' Linear table:
//   linear/<M>x<N>x<K>/linear/fused              bare Linear (no epilogue)
//   linear/<M>x<N>x<K>/bias_gelu/fused           fused<Linear, BiasAdd, GELU> (erf): one kernel
//   linear/<M>x<N>x<K>/bias_gelu/unfused         unfused<...>: Linear, then a BiasAdd pass, then a GELU pass
//   linear/<M>x<N>x<K>/bias/{fused,unfused}      BiasAdd only (the batch-1 classifier heads)
// each also on the two threads of pool2() (/t2). Counters: FLOP/s = 2*M*N*K (epilogues not counted);
// bytes/s = fp32 A + W + C once per call (for the GEMV shapes this is essentially the weight stream:
// compare with peak/stream_copy of the same run). Tensors are allocated, first-touched and filled once per
// shape; layers are built (weights packed) before the timed loop.
#include <cmath>
#include <functional>
#include <utility>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace opfuse_bench {
namespace {

struct linear_shape {
    index_t m, n, k;
    std::string name() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
    double flops() const { return 2.0 * double(m) * double(n) * double(k); }
    double bytes() const { return 4.0 * (double(m) * double(k) + double(n) * double(k) + double(m) * double(n)); }
};

const linear_shape kGemmShapes[] = {{64, 4096, 1024}, {128, 3072, 768}, {128, 768, 3072}, {256, 256, 256}};
const linear_shape kGemvShapes[] = {{1, 1000, 2048}, {1, 10, 3211264}};

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

linear_data& data_for(const linear_shape& s) {
    static std::map<std::string, std::unique_ptr<linear_data>> cache;
    auto& p = cache[s.name()];
    if (!p) p = std::make_unique<linear_data>(s);
    return *p;
}

enum class kind { linear, bias_gelu_fused, bias_gelu_unfused, bias_fused, bias_unfused };

// One layer bound to its shape's tensors: call(false) runs it serially, call(true) on pool2().
using linear_call = std::function<void(bool)>;

template <class Layer, class... Ctor>
linear_call bind(linear_data& d, const Ctor&... ctor) {
    auto layer = std::make_shared<const Layer>(ctor...);
    linear_data* dp = &d;
    return [layer, dp](bool two_threads) {
        if (two_threads)
            (*layer)(dp->av(), dp->cv(), pool2());
        else
            (*layer)(dp->av(), dp->cv());
    };
}

linear_call make_call(linear_data& d, kind k) {
    using namespace opfuse;
    const BiasAdd::params bias{span<const float>(d.bias.data(), d.bias.size())};
    const GELU::params gelu{GELU::Approximate::none};
    switch (k) {
        case kind::linear: return bind<fused<Linear>>(d, d.params());
        case kind::bias_gelu_fused: return bind<fused<Linear, BiasAdd, GELU>>(d, d.params(), bias, gelu);
        case kind::bias_gelu_unfused: return bind<unfused<Linear, BiasAdd, GELU>>(d, d.params(), bias, gelu);
        case kind::bias_fused: return bind<fused<Linear, BiasAdd>>(d, d.params(), bias);
        case kind::bias_unfused: return bind<unfused<Linear, BiasAdd>>(d, d.params(), bias);
    }
    return {};
}

// Layers are built once per (shape, kind) and kept: packing 128 MB of weights is not part of a call.
linear_call& call_for(const linear_shape& s, kind k) {
    static std::map<std::pair<std::string, int>, linear_call> cache;
    auto& c = cache[{s.name(), int(k)}];
    if (!c) c = make_call(data_for(s), k);
    return c;
}

void bench_linear(benchmark::State& state, const linear_shape& s, kind k, bool two_threads) {
    linear_call& call = call_for(s, k);
    if (two_threads) pool2();
    call(two_threads);  // warm-up
    for (auto _ : state) {
        call(two_threads);
        benchmark::ClobberMemory();
    }
    state.counters["FLOP/s"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bytes/s"] = benchmark::Counter(s.bytes(), benchmark::Counter::kIsIterationInvariantRate);
}

void add(const linear_shape& s, const char* suffix, kind k, bool t2) {
    const std::string name = "linear/" + s.name() + "/" + suffix + (t2 ? "/t2" : "");
    benchmark::RegisterBenchmark(name.c_str(), [s, k, t2](benchmark::State& st) { bench_linear(st, s, k, t2); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

// Registered at static initialisation; the entries of one shape run back to back (same clock, same DRAM
// bandwidth on this drifting VM).
const bool registered = [] {
    for (bool t2 : {false, true}) {
        for (const linear_shape& s : kGemmShapes) {
            add(s, "linear/fused", kind::linear, t2);
            add(s, "bias_gelu/fused", kind::bias_gelu_fused, t2);
            add(s, "bias_gelu/unfused", kind::bias_gelu_unfused, t2);
        }
        for (const linear_shape& s : kGemvShapes) {
            add(s, "linear/fused", kind::linear, t2);
            add(s, "bias/fused", kind::bias_fused, t2);
            add(s, "bias/unfused", kind::bias_unfused, t2);
        }
    }
    return true;
}();

}  // namespace
}  // namespace opfuse_bench
