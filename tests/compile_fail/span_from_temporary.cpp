// expect: assigning a temporary std::vector would leave it dangling
// A parameter span assigned a temporary vector would view freed memory by the time the op is built.
#include <opfuse/opfuse.hpp>
#include <vector>
std::vector<float> load_weights() { return std::vector<float>(16 * 8, 0.5f); }
int main() {
    opfuse::conv2d_params p;
    p.in_channels = 8;
    p.out_channels = 16;
    p.weights = load_weights();
    const opfuse::Conv2d conv(p);
    return 0;
}
