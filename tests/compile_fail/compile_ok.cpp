// Control for the compile_fail checks: the same command line compiles correct uses of the same API.
#include <opfuse/opfuse.hpp>
void run(const opfuse::fused<opfuse::Conv2d, opfuse::Add, opfuse::Relu>& f,
         const opfuse::unfused<opfuse::Conv2d, opfuse::Mul>& g, opfuse::TensorView<const float, 4> in,
         opfuse::TensorView<float, 4> out, opfuse::thread_pool& pool) {
    f(in, out, in);
    f(in, out, in, pool);
    g(in, out, in, pool);
}
// A span assigned a named vector (the correct form of span_from_temporary.cpp) and built from a temporary
// that lives through the constructor call.
std::vector<float> load_weights() { return std::vector<float>(16 * 8, 0.5f); }
int main() {
    const std::vector<float> w = load_weights();
    opfuse::conv2d_params p;
    p.in_channels = 8;
    p.out_channels = 16;
    p.weights = w;
    const opfuse::Conv2d conv(p);
    const opfuse::Linear linear(opfuse::Linear::params{8, 16, load_weights()});
    return sizeof(opfuse::fused<opfuse::Conv2d>) > 0 ? 0 : 1;
}
