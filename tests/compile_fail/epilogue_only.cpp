// expect: the first type must be a main op
// A chain without a main op is not a kernel.
#include <opfuse/opfuse.hpp>
int main() { return sizeof(opfuse::fused<opfuse::Relu>) > 0; }
