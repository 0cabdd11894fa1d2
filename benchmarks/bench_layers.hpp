// The opfuse layers of the benchmark patterns, as a template over fused/unfused. Instantiated in two
// translation units (bench_layers_fused.cpp, bench_layers_unfused.cpp) so that -j2 builds them in parallel.
#pragma once

#include <memory>

#include "bench_common.hpp"

namespace opfuse_bench {
namespace layer_impl {

template <class Layer, class... Ctor>
layer_call bind(shape_data& d, opfuse::Layout layout, const Ctor&... ctor) {
    auto layer = std::make_shared<const Layer>(ctor...);
    shape_data* dp = &d;
    return [layer, dp, layout](bool two_threads) {
        const auto in = dp->in_view(layout);
        const auto out = dp->out_view(layout);
        if constexpr (Layer::tensor_operands == 1) {
            if (two_threads)
                (*layer)(in, out, dp->residual_view(layout), pool2());
            else
                (*layer)(in, out, dp->residual_view(layout));
        } else {
            if (two_threads)
                (*layer)(in, out, pool2());
            else
                (*layer)(in, out);
        }
    };
}

template <template <class, class...> class Kind>
layer_call make_call(shape_data& d, pattern p, opfuse::Layout l) {
    using namespace opfuse;
    const BiasAdd::params bias{span<const float>(d.bias.data(), d.bias.size())};
    const BatchNorm::params bn{span<const float>(d.gamma.data(), d.gamma.size()),
                               span<const float>(d.beta.data(), d.beta.size()),
                               span<const float>(d.mean.data(), d.mean.size()),
                               span<const float>(d.var.data(), d.var.size()), 1e-5f};
    switch (p) {
        case pattern::conv:
            return bind<Kind<Conv2d>>(d, l, d.params());
        case pattern::bias_relu:
            return bind<Kind<Conv2d, BiasAdd, Relu>>(d, l, d.params(), bias, Relu::params{});
        case pattern::bn_relu_folded:
            return bind<Kind<Conv2d, BatchNorm, Relu>>(d, l, d.params(true), bn, Relu::params{});
        case pattern::bn_relu_epilogue:
            return bind<Kind<Conv2d, BatchNorm, Relu>>(d, l, d.params(false), bn, Relu::params{});
        case pattern::bn_add_relu:
            return bind<Kind<Conv2d, BatchNorm, Add, Relu>>(d, l, d.params(), bn, Add::params{}, Relu::params{});
        case pattern::bias_relu6:
            return bind<Kind<Conv2d, BiasAdd, Relu6>>(d, l, d.params(), bias, Relu6::params{});
    }
    return {};
}

}  // namespace layer_impl

template <template <class, class...> class Kind>
layer_call make_layer_call(shape_data& d, pattern p, opfuse::Layout layout) {
    return layer_impl::make_call<Kind>(d, p, layout);
}

}  // namespace opfuse_bench
