// Control for the compile_fail checks: the same command line compiles correct uses of the same API.
#include <opfuse/opfuse.hpp>
void run(const opfuse::fused<opfuse::Conv2d, opfuse::Add, opfuse::Relu>& f,
         const opfuse::unfused<opfuse::Conv2d, opfuse::Mul>& g, opfuse::TensorView<const float, 4> in,
         opfuse::TensorView<float, 4> out, opfuse::thread_pool& pool) {
    f(in, out, in);
    f(in, out, in, pool);
    g(in, out, in, pool);
}
int main() { return sizeof(opfuse::fused<opfuse::Conv2d>) > 0 ? 0 : 1; }
