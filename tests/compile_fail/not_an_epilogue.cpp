// expect: every type after the main op must be an epilogue
#include <opfuse/opfuse.hpp>
struct NoParams {};
int main() { return sizeof(opfuse::fused<opfuse::Conv2d, NoParams>) > 0; }
