// expect: wrong number of tensor arguments
// fused<Conv2d, Add, Relu> needs the residual tensor after the output.
#include <opfuse/opfuse.hpp>
void run(const opfuse::fused<opfuse::Conv2d, opfuse::Add, opfuse::Relu>& f, opfuse::TensorView<const float, 4> in,
         opfuse::TensorView<float, 4> out) {
    f(in, out);
}
