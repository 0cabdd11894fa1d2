// The opfuse entries: conv/<shape>/<pattern>/{fused,unfused}[/t2], and conv/<shape>/bn_relu_folded/fused_nchw
// (1 thread): the same fused layer on NCHW views of the same buffers.
// Every entry of a shape runs on that shape's shared tensors (data_for). The layer object is built on the
// entry's first call (weight packing and BN folding happen there, untimed) and then reused. The layers
// themselves are built in bench_layers_{fused,unfused}.cpp.
#include <functional>
#include <memory>
#include <string>

#include "bench_common.hpp"

namespace opfuse_bench {

layer_call make_opfuse_call(shape_data& d, pattern p, bool fused) {
    return fused ? make_fused_call(d, p) : make_unfused_call(d, p);
}

namespace {

void register_entry(const std::string& name, const conv_shape& s, pattern p, int threads,
                    std::function<layer_call(shape_data&)> make) {
    auto cached = std::make_shared<layer_call>();
    benchmark::RegisterBenchmark(name.c_str(), [s, p, threads, cached, make](benchmark::State& state) {
        const bool two = threads == 2;
        try {
            if (!*cached) *cached = make(data_for(s));
            if (two) pool2();
            (*cached)(two);  // warm-up: caches, pool wake-up; never timed
        } catch (const std::exception& e) {
            state.SkipWithError(e.what());
            return;
        }
        const layer_call& call = *cached;
        for (auto _ : state) {
            call(two);
            benchmark::ClobberMemory();
        }
        set_conv_counters(state, s, p);
    })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_opfuse_benchmarks(const conv_shape& s, int threads) {
    for (pattern p : patterns_for(s)) {
        // 2 threads: only the headline pattern, to keep a full run short.
        if (threads != 1 && p != pattern::bn_relu_folded) continue;
        for (bool fused : {true, false}) {
            const std::string name = std::string("conv/") + s.name + "/" + to_string(p) +
                                     (fused ? "/fused" : "/unfused") + (threads == 2 ? "/t2" : "");
            register_entry(name, s, p, threads, [p, fused](shape_data& d) { return make_opfuse_call(d, p, fused); });
        }
    }
    if (threads == 1) {
        const pattern p = pattern::bn_relu_folded;
        register_entry(std::string("conv/") + s.name + "/" + to_string(p) + "/fused_nchw", s, p, 1,
                       [p](shape_data& d) { return make_fused_call(d, p, opfuse::Layout::NCHW); });
    }
}

}  // namespace opfuse_bench
