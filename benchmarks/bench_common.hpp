// Shared by the benchmark sources: the conv shape table (the anchors' oneDNN table), the epilogue patterns,
// the per-shape tensors (allocated, first-touched and filled once, then reused by every entry of the shape:
// opfuse fused, opfuse unfused and oneDNN), and the FLOP / byte counts reported as counters.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <opfuse/opfuse.hpp>

namespace opfuse_bench {

using opfuse::index_t;

// One convolution layer, batch 1, NHWC. `groups == cin == cout` is depthwise.
struct conv_shape {
    const char* name;  // "64x64@56k3", "256x512@56k1s2", "dw144@56k3": the second field of entry names
    index_t cin, cout, hw, k, stride, pad, groups;

    bool depthwise() const { return groups > 1 && groups == cin && groups == cout; }
    index_t out_hw() const { return (hw + 2 * pad - k) / stride + 1; }
    index_t input_size() const { return hw * hw * cin; }
    index_t output_size() const { return out_hw() * out_hw() * cout; }
    index_t weight_size() const { return cout * (cin / groups) * k * k; }
    // 2 FLOP per multiply-add of the convolution; the epilogues are not counted.
    double flops() const { return 2.0 * double(output_size()) * double(cin / groups) * double(k * k); }
};

const std::vector<conv_shape>& shapes();

// The epilogue chains after the conv. Every pattern is registered as a fused and an unfused entry.
enum class pattern {
    conv,              // Conv2d alone
    bias_relu,         // + BiasAdd + Relu
    bn_relu_folded,    // + BatchNorm + Relu, BN folded into the packed weights (fold_batchnorm = true)
    bn_relu_epilogue,  // + BatchNorm + Relu, BN applied on the registers (fold_batchnorm = false)
    bn_add_relu,       // + BatchNorm + Add(residual) + Relu
    bias_relu6,        // + BiasAdd + Relu6 (depthwise shapes only)
};

const char* to_string(pattern p);
bool reads_residual(pattern p);
// The patterns registered for a shape: the first five for every shape, bias_relu6 for depthwise ones.
std::vector<pattern> patterns_for(const conv_shape& s);

// Minimal tensor traffic of one call, in bytes: input + weights + output (+ residual for bn_add_relu),
// each read or written exactly once, fp32. Per-channel vectors (bias, BN) are not counted (<= 2 KiB).
// Unfused entries report the same figure (it is a rate of useful traffic, not of actual traffic).
double min_bytes(const conv_shape& s, pattern p);

// The tensors of one shape, seeded random, shared by all entries of that shape. Inputs and residual in
// [-1, 1], weights scaled by 1/sqrt(fan_in) so outputs stay O(1), BN statistics in sane ranges.
struct shape_data {
    conv_shape shape;
    opfuse::aligned_buffer in, out, residual, weights;
    std::vector<float> bias, gamma, beta, mean, var;

    // The tensors as NHWC (the suite's default) or NCHW views of the same buffers.
    opfuse::TensorView<const float, 4> in_view(opfuse::Layout l = opfuse::Layout::NHWC) const;
    opfuse::TensorView<float, 4> out_view(opfuse::Layout l = opfuse::Layout::NHWC);
    opfuse::TensorView<const float, 4> residual_view(opfuse::Layout l = opfuse::Layout::NHWC) const;
    opfuse::conv2d_params params(bool fold_batchnorm = true) const;
};

// Built on first use (outside any timed region) and kept for the rest of the run.
shape_data& data_for(const conv_shape& s);

// The process-wide 2-thread pool of the /t2 entries (created on first use).
opfuse::thread_pool& pool2();

// A ready-to-call opfuse layer for (shape, pattern) bound to the shape's tensors: call(false) runs it on
// the serial executor, call(true) on pool2(). Constructing it packs the weights (not timed).
using layer_call = std::function<void(bool two_threads)>;
layer_call make_opfuse_call(shape_data& d, pattern p, bool fused);
// bench_layers_fused.cpp; `layout` NCHW runs the same layer on NCHW views (conv/.../fused_nchw entries).
layer_call make_fused_call(shape_data& d, pattern p, opfuse::Layout layout = opfuse::Layout::NHWC);
layer_call make_unfused_call(shape_data& d, pattern p);  // bench_layers_unfused.cpp

// The counters every conv entry reports.
void set_conv_counters(benchmark::State& state, const conv_shape& s, pattern p);

// Registration, in run order (see bench_main.cpp).
void register_peak_benchmarks();
void register_fma_peak_again();  // the FMA peak once more, at the end of the run
void register_opfuse_benchmarks(const conv_shape& s, int threads);
#ifdef OPFUSE_BENCH_ONEDNN
void register_onednn_benchmarks(const conv_shape& s, int threads);
void add_onednn_context();
#endif

}  // namespace opfuse_bench
