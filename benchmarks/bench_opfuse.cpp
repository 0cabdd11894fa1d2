// The opfuse entries: conv/<shape>/<pattern>/{fused,unfused}[/t2].
// Every entry of a shape runs on that shape's shared tensors (data_for). The layer object is built on the
// entry's first call (weight packing and BN folding happen there, untimed) and then reused.
#include <memory>
#include <string>

// unfused<Conv2d> (no epilogue) trips -Wunused-but-set-variable inside unfused.hpp (the per-epilogue
// lambda of passes() is never called when the chain is empty). Library issue; silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#endif

#include "bench_common.hpp"

namespace opfuse_bench {
namespace {

template <class Layer, class... Ctor>
layer_call bind(shape_data& d, const Ctor&... ctor) {
    auto layer = std::make_shared<const Layer>(ctor...);
    shape_data* dp = &d;
    return [layer, dp](bool two_threads) {
        const auto in = dp->in_view();
        const auto out = dp->out_view();
        if constexpr (Layer::tensor_operands == 1) {
            if (two_threads)
                (*layer)(in, out, dp->residual_view(), pool2());
            else
                (*layer)(in, out, dp->residual_view());
        } else {
            if (two_threads)
                (*layer)(in, out, pool2());
            else
                (*layer)(in, out);
        }
    };
}

template <template <class, class...> class Kind>
layer_call make_call(shape_data& d, pattern p) {
    using namespace opfuse;
    const BiasAdd::params bias{span<const float>(d.bias.data(), d.bias.size())};
    const BatchNorm::params bn{span<const float>(d.gamma.data(), d.gamma.size()),
                               span<const float>(d.beta.data(), d.beta.size()),
                               span<const float>(d.mean.data(), d.mean.size()),
                               span<const float>(d.var.data(), d.var.size()), 1e-5f};
    switch (p) {
        case pattern::conv:
            return bind<Kind<Conv2d>>(d, d.params());
        case pattern::bias_relu:
            return bind<Kind<Conv2d, BiasAdd, Relu>>(d, d.params(), bias, Relu::params{});
        case pattern::bn_relu_folded:
            return bind<Kind<Conv2d, BatchNorm, Relu>>(d, d.params(true), bn, Relu::params{});
        case pattern::bn_relu_epilogue:
            return bind<Kind<Conv2d, BatchNorm, Relu>>(d, d.params(false), bn, Relu::params{});
        case pattern::bn_add_relu:
            return bind<Kind<Conv2d, BatchNorm, Add, Relu>>(d, d.params(), bn, Add::params{}, Relu::params{});
        case pattern::bias_relu6:
            return bind<Kind<Conv2d, BiasAdd, Relu6>>(d, d.params(), bias, Relu6::params{});
    }
    return {};
}

}  // namespace

layer_call make_opfuse_call(shape_data& d, pattern p, bool fused) {
    return fused ? make_call<opfuse::fused>(d, p) : make_call<opfuse::unfused>(d, p);
}

void register_opfuse_benchmarks(const conv_shape& s, int threads) {
    for (pattern p : patterns_for(s)) {
        // 2 threads: only the headline pattern, to keep a full run short.
        if (threads != 1 && p != pattern::bn_relu_folded) continue;
        for (bool fused : {true, false}) {
            const std::string name = std::string("conv/") + s.name + "/" + to_string(p) +
                                     (fused ? "/fused" : "/unfused") + (threads == 2 ? "/t2" : "");
            auto cached = std::make_shared<layer_call>();
            benchmark::RegisterBenchmark(name.c_str(), [s, p, fused, threads, cached](benchmark::State& state) {
                const bool two = threads == 2;
                try {
                    if (!*cached) *cached = make_opfuse_call(data_for(s), p, fused);
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
    }
}

}  // namespace opfuse_bench
