// The oneDNN side of the Linear comparison: onednn_linear/<M>x<N>x<K>/<pattern>[/t2], built only when
// find_package(dnnl) finds oneDNN. Same tensors as the opfuse linear/ entries of the shape (linear_data_for),
// through oneDNN's matmul primitive as a framework would call it: fp32, A [M][K] row-major, the weights
// given as W^T ([K][N] view of the [N][K] nn.Linear buffer) and reordered once, outside the timing, into
// the primitive's preferred layout (format_tag::any), post-ops fused:
//     linear      no bias, no post-op                       peer of linear/<shape>/linear/fused
//     bias_gelu   matmul bias + eltwise_gelu_erf            peer of linear/<shape>/bias_gelu/fused
//     bias        matmul bias                               peer of linear/<shape>/bias/fused (GEMV shapes)
// Threads as for the conv entries (bench_onednn.cpp): omp_set_num_threads(1 or 2) before creating and
// before running. Counters as the opfuse entries (FLOP/s, bytes/s), plus max_abs_diff against opfuse's
// fused layer on the same tensors (computed once) and os_threads; the label is oneDNN's implementation.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_linear.hpp"
#include "bench_onednn.hpp"

namespace opfuse_bench {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class matmul_pattern { linear, bias_gelu, bias };

const char* to_string(matmul_pattern p) {
    switch (p) {
        case matmul_pattern::linear: return "linear";
        case matmul_pattern::bias_gelu: return "bias_gelu";
        case matmul_pattern::bias: return "bias";
    }
    return "?";
}

linear_kind opfuse_peer(matmul_pattern p) {
    switch (p) {
        case matmul_pattern::linear: return linear_kind::linear;
        case matmul_pattern::bias_gelu: return linear_kind::bias_gelu_fused;
        case matmul_pattern::bias: return linear_kind::bias_fused;
    }
    return linear_kind::linear;
}

struct onednn_matmul {
    dnnl::matmul prim;
    std::unordered_map<int, memory> args;
    std::string impl;
    double max_abs_diff = -1.0;

    void run(dnnl::stream& s) { prim.execute(s, args); }
};

std::unique_ptr<onednn_matmul> build(linear_data& d, matmul_pattern p) {
    dnnl::engine& eng = onednn_engine();
    const memory::dim M = d.shape.m, N = d.shape.n, K = d.shape.k;
    const bool with_bias = p != matmul_pattern::linear;
    const memory::desc a_md({M, K}, dt::f32, tag::ab);
    const memory::desc user_w_md({K, N}, dt::f32, tag::ba);  // W^T over the [N][K] buffer
    const memory::desc any_w_md({K, N}, dt::f32, tag::any);
    const memory::desc bias_md = with_bias ? memory::desc({1, N}, dt::f32, tag::ab) : memory::desc();
    const memory::desc c_md({M, N}, dt::f32, tag::ab);

    dnnl::post_ops po;
    if (p == matmul_pattern::bias_gelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, any_w_md, bias_md, c_md), attr, eng);

    auto mm = std::make_unique<onednn_matmul>();
    mm->prim = dnnl::matmul(pd);
    mm->impl = pd.impl_info_str();

    memory user_w(user_w_md, eng, d.w.data());
    memory w(pd.weights_desc(), eng);
    dnnl::stream st(eng);
    dnnl::reorder(user_w, w).execute(st, user_w, w);
    st.wait();

    mm->args[DNNL_ARG_SRC] = memory(a_md, eng, d.a.data());
    mm->args[DNNL_ARG_WEIGHTS] = w;
    mm->args[DNNL_ARG_DST] = memory(c_md, eng, d.c.data());
    if (with_bias) mm->args[DNNL_ARG_BIAS] = memory(bias_md, eng, d.bias.data());
    return mm;
}

// Runs both on the shared tensors and returns max |oneDNN - opfuse fused|.
double compare_with_opfuse(linear_data& d, matmul_pattern p, onednn_matmul& mm, dnnl::stream& st) {
    mm.run(st);
    st.wait();
    const std::vector<float> theirs(d.c.data(), d.c.data() + d.c.size());
    linear_call_for(d.shape, opfuse_peer(p))(false);
    double diff = 0.0;
    for (std::size_t i = 0; i < theirs.size(); ++i) diff = std::max(diff, double(std::fabs(theirs[i] - d.c[i])));
    return diff;
}

}  // namespace

void register_onednn_linear_benchmarks(const linear_shape& s, bool two_threads) {
    const int threads = two_threads ? 2 : 1;
    const std::vector<matmul_pattern> ps = s.m == 1 ? std::vector<matmul_pattern>{matmul_pattern::linear,
                                                                                  matmul_pattern::bias}
                                                    : std::vector<matmul_pattern>{matmul_pattern::linear,
                                                                                  matmul_pattern::bias_gelu};
    for (matmul_pattern p : ps) {
        const std::string name = "onednn_linear/" + s.name() + "/" + to_string(p) + (two_threads ? "/t2" : "");
        auto cached = std::make_shared<std::unique_ptr<onednn_matmul>>();
        benchmark::RegisterBenchmark(name.c_str(), [s, p, threads, cached](benchmark::State& state) {
            const bool ok = run_onednn_entry(state, threads, *cached, [&](dnnl::stream& st) {
                linear_data& d = linear_data_for(s);
                auto mm = build(d, p);
                mm->max_abs_diff = compare_with_opfuse(d, p, *mm, st);
                return mm;
            });
            if (!ok) return;
            state.counters["FLOP/s"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
            state.counters["bytes/s"] = benchmark::Counter(s.bytes(), benchmark::Counter::kIsIterationInvariantRate);
        })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
}

}  // namespace opfuse_bench
