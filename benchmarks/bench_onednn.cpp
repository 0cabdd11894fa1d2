// The oneDNN side of the comparison: onednn/<shape>/<pattern>[/t2], built only when find_package(dnnl)
// finds oneDNN. Same shapes and tensors as the opfuse entries (data_for), through oneDNN's convolution
// primitive the way a framework would call it:
//   fp32, NHWC activations (format_tag::nhwc), weights format_tag::any reordered once outside the timing,
//   forward_inference, convolution_direct, post-ops fused into the primitive:
//     conv         no bias, no post-op
//     bias_relu    conv bias + eltwise_relu
//     bn_relu      binary_mul(scale[c]) + binary_add(shift[c]) + eltwise_relu   (BN as post-ops, no bias)
//     bn_add_relu  binary_mul(scale[c]) + binary_add(shift[c]) + binary_add(residual) + eltwise_relu
//     bias_relu6   conv bias + eltwise_clip(0, 6)                               (depthwise shapes)
//   scale = gamma / sqrt(var + eps), shift = beta - mean * scale, computed as opfuse's BatchNorm does.
// bn_relu is the peer of opfuse's bn_relu_folded and bn_relu_epilogue; the others map by name.
//
// Threads: Debian's oneDNN uses OpenMP. Every entry calls omp_set_num_threads(1) (or 2 for /t2) before
// it creates its primitive (oneDNN sizes its work split at creation) and before it runs. The counter
// `os_threads` reports the process's thread count after the timed loop, as a check (1 for 1-thread
// entries until the opfuse pool exists; pool worker + OpenMP worker add one each).
//
// Correctness: on its first call every entry also runs the matching fused opfuse layer on the same
// tensors and reports the largest absolute difference as the counter `max_abs_diff` (outputs are O(1)).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <dirent.h>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_common.hpp"
#include "bench_onednn.hpp"

namespace opfuse_bench {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class onednn_pattern { conv, bias_relu, bn_relu, bn_add_relu, bias_relu6 };

const char* to_string(onednn_pattern p) {
    switch (p) {
        case onednn_pattern::conv: return "conv";
        case onednn_pattern::bias_relu: return "bias_relu";
        case onednn_pattern::bn_relu: return "bn_relu";
        case onednn_pattern::bn_add_relu: return "bn_add_relu";
        case onednn_pattern::bias_relu6: return "bias_relu6";
    }
    return "?";
}

// The opfuse pattern whose output must match, and whose FLOP/byte counts the entry reports.
pattern opfuse_peer(onednn_pattern p) {
    switch (p) {
        case onednn_pattern::conv: return pattern::conv;
        case onednn_pattern::bias_relu: return pattern::bias_relu;
        case onednn_pattern::bn_relu: return pattern::bn_relu_folded;
        case onednn_pattern::bn_add_relu: return pattern::bn_add_relu;
        case onednn_pattern::bias_relu6: return pattern::bias_relu6;
    }
    return pattern::conv;
}

struct onednn_layer {
    dnnl::convolution_forward conv;
    std::unordered_map<int, memory> args;
    std::string impl;
    double max_abs_diff = -1.0;

    void run(dnnl::stream& s) { conv.execute(s, args); }
};

std::unique_ptr<onednn_layer> build(shape_data& d, onednn_pattern p) {
    const conv_shape& s = d.shape;
    dnnl::engine& eng = onednn_engine();
    const memory::dim N = 1, IC = s.cin, OC = s.cout, H = s.hw, OH = s.out_hw(), K = s.k, G = s.groups;
    const bool with_bias = p == onednn_pattern::bias_relu || p == onednn_pattern::bias_relu6;
    const bool with_bn = p == onednn_pattern::bn_relu || p == onednn_pattern::bn_add_relu;

    const memory::desc src_md({N, IC, H, H}, dt::f32, tag::nhwc);
    const memory::desc dst_md({N, OC, OH, OH}, dt::f32, tag::nhwc);
    const memory::dims wdims = G > 1 ? memory::dims{G, OC / G, IC / G, K, K} : memory::dims{OC, IC, K, K};
    const memory::desc user_w_md(wdims, dt::f32, G > 1 ? tag::goihw : tag::oihw);
    const memory::desc any_w_md(wdims, dt::f32, tag::any);
    const memory::desc bias_md = with_bias ? memory::desc({OC}, dt::f32, tag::x) : memory::desc();
    const memory::desc channel_md({1, OC, 1, 1}, dt::f32, tag::nchw);  // per-channel binary operand

    dnnl::post_ops po;
    if (with_bn) {
        po.append_binary(dnnl::algorithm::binary_mul, channel_md);
        po.append_binary(dnnl::algorithm::binary_add, channel_md);
    }
    if (p == onednn_pattern::bn_add_relu) po.append_binary(dnnl::algorithm::binary_add, dst_md);
    if (p == onednn_pattern::bias_relu6)
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 6.f);
    else if (p != onednn_pattern::conv)
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);

    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, any_w_md, bias_md, dst_md,
        {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);

    auto layer = std::make_unique<onednn_layer>();
    layer->conv = dnnl::convolution_forward(pd);
    layer->impl = pd.impl_info_str();

    // Weights: reordered once into the primitive's preferred layout.
    memory user_w(user_w_md, eng, d.weights.data());
    memory w(pd.weights_desc(), eng);
    dnnl::stream st(eng);
    dnnl::reorder(user_w, w).execute(st, user_w, w);
    st.wait();

    auto& a = layer->args;
    a[DNNL_ARG_SRC] = memory(src_md, eng, d.in.data());
    a[DNNL_ARG_WEIGHTS] = w;
    a[DNNL_ARG_DST] = memory(dst_md, eng, d.out.data());
    if (with_bias) a[DNNL_ARG_BIAS] = memory(bias_md, eng, d.bias.data());
    int idx = 0;
    if (with_bn) {
        memory scale(channel_md, eng), shift(channel_md, eng);
        auto* sc = static_cast<float*>(scale.get_data_handle());
        auto* sh = static_cast<float*>(shift.get_data_handle());
        for (index_t c = 0; c < OC; ++c) {
            const auto i = static_cast<std::size_t>(c);
            sc[i] = static_cast<float>(d.gamma[i] / std::sqrt(static_cast<double>(d.var[i]) + 1e-5f));
            sh[i] = static_cast<float>(d.beta[i] - static_cast<double>(d.mean[i]) * sc[i]);
        }
        a[DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx++) | DNNL_ARG_SRC_1] = scale;
        a[DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx++) | DNNL_ARG_SRC_1] = shift;
    }
    if (p == onednn_pattern::bn_add_relu)
        a[DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx++) | DNNL_ARG_SRC_1] = memory(dst_md, eng, d.residual.data());
    return layer;
}

// Runs both on the shared tensors and returns max |oneDNN - opfuse fused|.
double compare_with_opfuse(shape_data& d, onednn_pattern p, onednn_layer& layer, dnnl::stream& st) {
    layer.run(st);
    st.wait();
    const std::vector<float> theirs(d.out.data(), d.out.data() + d.out.size());
    make_opfuse_call(d, opfuse_peer(p), true)(false);
    double diff = 0.0;
    for (std::size_t i = 0; i < theirs.size(); ++i) diff = std::max(diff, double(std::fabs(theirs[i] - d.out[i])));
    return diff;
}

}  // namespace

dnnl::engine& onednn_engine() {
    static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    return eng;
}

int os_threads() {
    int n = 0;
    if (DIR* dir = opendir("/proc/self/task")) {
        while (const dirent* e = readdir(dir))
            if (e->d_name[0] != '.') ++n;
        closedir(dir);
    }
    return n;
}

void register_onednn_benchmarks(const conv_shape& s, int threads) {
    std::vector<onednn_pattern> ps = {onednn_pattern::conv, onednn_pattern::bias_relu, onednn_pattern::bn_relu,
                                      onednn_pattern::bn_add_relu};
    if (s.depthwise()) ps.push_back(onednn_pattern::bias_relu6);
    for (onednn_pattern p : ps) {
        if (threads != 1 && p != onednn_pattern::bn_relu) continue;
        const std::string name =
            std::string("onednn/") + s.name + "/" + to_string(p) + (threads == 2 ? "/t2" : "");
        auto cached = std::make_shared<std::unique_ptr<onednn_layer>>();
        benchmark::RegisterBenchmark(name.c_str(), [s, p, threads, cached](benchmark::State& state) {
            const bool ok = run_onednn_entry(state, threads, *cached, [&](dnnl::stream& st) {
                shape_data& d = data_for(s);
                auto layer = build(d, p);
                layer->max_abs_diff = compare_with_opfuse(d, p, *layer, st);
                return layer;
            });
            if (ok) set_conv_counters(state, s, opfuse_peer(p));
        })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
}

void add_onednn_context() {
    const dnnl_version_t* v = dnnl::version();
    benchmark::AddCustomContext("onednn_version", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                                      std::to_string(v->patch));
    omp_set_num_threads(1);
    benchmark::AddCustomContext("onednn_threads", "1 (omp_set_num_threads per entry; /t2 entries: 2)");
}

}  // namespace opfuse_bench
