// opfuse::fused<Conv2d, ...> for every benchmark pattern (see bench_layers.hpp).
#include "bench_layers.hpp"

namespace opfuse_bench {

layer_call make_fused_call(shape_data& d, pattern p, opfuse::Layout layout) {
    return make_layer_call<opfuse::fused>(d, p, layout);
}

}  // namespace opfuse_bench
