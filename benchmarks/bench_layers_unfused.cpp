// opfuse::unfused<Conv2d, ...> for every benchmark pattern (see bench_layers.hpp).

#include "bench_layers.hpp"

namespace opfuse_bench {

layer_call make_unfused_call(shape_data& d, pattern p) { return make_layer_call<opfuse::unfused>(d, p, opfuse::Layout::NHWC); }

}  // namespace opfuse_bench
