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

#include "bench_linear.hpp"

namespace opfuse_bench {
namespace {

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

linear_call make_call(linear_data& d, linear_kind k) {
    using namespace opfuse;
    const BiasAdd::params bias{span<const float>(d.bias.data(), d.bias.size())};
    const GELU::params gelu{GELU::Approximate::none};
    switch (k) {
        case linear_kind::linear: return bind<fused<Linear>>(d, d.params());
        case linear_kind::bias_gelu_fused: return bind<fused<Linear, BiasAdd, GELU>>(d, d.params(), bias, gelu);
        case linear_kind::bias_gelu_unfused: return bind<unfused<Linear, BiasAdd, GELU>>(d, d.params(), bias, gelu);
        case linear_kind::bias_fused: return bind<fused<Linear, BiasAdd>>(d, d.params(), bias);
        case linear_kind::bias_unfused: return bind<unfused<Linear, BiasAdd>>(d, d.params(), bias);
    }
    return {};
}

}  // namespace

linear_data& linear_data_for(const linear_shape& s) {
    static std::map<std::string, std::unique_ptr<linear_data>> cache;
    auto& p = cache[s.name()];
    if (!p) p = std::make_unique<linear_data>(s);
    return *p;
}

// Layers are built once per (shape, kind) and kept: packing 128 MB of weights is not part of a call.
linear_call& linear_call_for(const linear_shape& s, linear_kind k) {
    static std::map<std::pair<std::string, int>, linear_call> cache;
    auto& c = cache[{s.name(), int(k)}];
    if (!c) c = make_call(linear_data_for(s), k);
    return c;
}

namespace {

void bench_linear(benchmark::State& state, const linear_shape& s, linear_kind k, bool two_threads) {
    linear_call& call = linear_call_for(s, k);
    if (two_threads) pool2();
    call(two_threads);  // warm-up
    for (auto _ : state) {
        call(two_threads);
        benchmark::ClobberMemory();
    }
    state.counters["FLOP/s"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bytes/s"] = benchmark::Counter(s.bytes(), benchmark::Counter::kIsIterationInvariantRate);
}

void add(const linear_shape& s, const char* suffix, linear_kind k, bool t2) {
    const std::string name = "linear/" + s.name() + "/" + suffix + (t2 ? "/t2" : "");
    benchmark::RegisterBenchmark(name.c_str(), [s, k, t2](benchmark::State& st) { bench_linear(st, s, k, t2); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace

// The entries of one shape run back to back, oneDNN's right after opfuse's (same clock, same DRAM
// bandwidth on this drifting VM).
void register_linear_benchmarks() {
    for (bool t2 : {false, true}) {
        for (const linear_shape& s : kGemmShapes) {
            add(s, "linear/fused", linear_kind::linear, t2);
            add(s, "bias_gelu/fused", linear_kind::bias_gelu_fused, t2);
            add(s, "bias_gelu/unfused", linear_kind::bias_gelu_unfused, t2);
#ifdef OPFUSE_BENCH_ONEDNN
            register_onednn_linear_benchmarks(s, t2);
#endif
        }
        for (const linear_shape& s : kGemvShapes) {
            add(s, "linear/fused", linear_kind::linear, t2);
            add(s, "bias/fused", linear_kind::bias_fused, t2);
            add(s, "bias/unfused", linear_kind::bias_unfused, t2);
#ifdef OPFUSE_BENCH_ONEDNN
            register_onednn_linear_benchmarks(s, t2);
#endif
        }
    }
}

}  // namespace opfuse_bench
