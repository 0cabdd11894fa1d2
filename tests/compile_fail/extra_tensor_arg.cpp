// expect: wrong number of tensor arguments
// One tensor too many (with an executor last).
#include <opfuse/opfuse.hpp>
void run(const opfuse::unfused<opfuse::Conv2d, opfuse::Mul>& f, opfuse::TensorView<const float, 4> in,
         opfuse::TensorView<float, 4> out, opfuse::thread_pool& pool) {
    f(in, out, in, in, pool);
}
