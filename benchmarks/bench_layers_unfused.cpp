// opfuse::unfused<Conv2d, ...> for every benchmark pattern (see bench_layers.hpp).

// unfused<Conv2d> (no epilogue) trips -Wunused-but-set-variable inside unfused.hpp: the per-epilogue lambda
// of unfused::passes() is set but never called when the chain is empty. A library issue, silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#endif

#include "bench_layers.hpp"

namespace opfuse_bench {

layer_call make_unfused_call(shape_data& d, pattern p) { return make_layer_call<opfuse::unfused>(d, p); }

}  // namespace opfuse_bench
