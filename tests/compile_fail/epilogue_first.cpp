// expect: the first type must be a main op
// An epilogue cannot come first.
#include <opfuse/opfuse.hpp>
int main() {
    opfuse::fused<opfuse::Relu, opfuse::Conv2d>* f = nullptr;
    return f ? 1 : sizeof(*f) > 0;
}
