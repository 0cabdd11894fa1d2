// expect: only one main op per fused kernel
#include <opfuse/opfuse.hpp>
int main() { return sizeof(opfuse::fused<opfuse::Conv2d, opfuse::Relu, opfuse::Conv2d>) > 0; }
