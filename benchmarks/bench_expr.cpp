// The standalone elementwise chain of the anchors table: y = relu(x * s[c] + t[c] + r), NHWC, C = 64,
// at 1x56x56x64 (in cache) and 1x1024x1024x64 (256 MiB per tensor), as
//   expr/relu_affine_add/<shape>/fused            one opfuse::expr::assign pass (store_policy::automatic:
//                                                 regular stores in cache, streaming stores for 256 MiB)
//   expr/relu_affine_add/<shape>/fused_regular    the same, forcing ordinary stores
//   expr/relu_affine_add/<shape>/fused_streaming  the same, forcing non-temporal stores
//   expr/relu_affine_add/<shape>/unfused          four passes, one per op, each writing y:
//                                                 y = x * s;  y = y + t;  y = y + r;  y = relu(y)
// each also on the two threads of pool2() (/t2). bytes/s counts the useful traffic of the fused chain:
// x and r read once, y written once (12 bytes per element), for the unfused entries too. Compare with
// peak/stream_triad of the same run (bench_peak.cpp), which counts 12 bytes per element the same way.
#include <opfuse/expr/expr.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace opfuse_bench {
namespace {

namespace ex = opfuse::expr;

struct expr_shape {
    const char* name;
    index_t h, w, c;
    index_t size() const { return h * w * c; }
};

const expr_shape kExprShapes[] = {
    {"1x56x56x64", 56, 56, 64},
    {"1x1024x1024x64", 1024, 1024, 64},  // 256 MiB per tensor
};

// x, r, y and the per-channel s, t of one shape: allocated, first-touched and filled once.
struct expr_data {
    expr_shape shape;
    opfuse::aligned_buffer x, r, y;
    std::vector<float> s, t;
    explicit expr_data(const expr_shape& sh)
        : shape(sh), x(std::size_t(sh.size())), r(std::size_t(sh.size())), y(std::size_t(sh.size())) {
        std::mt19937 g(7);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = u(g), r[i] = u(g);
        s.resize(std::size_t(sh.c));
        t.resize(std::size_t(sh.c));
        for (auto& v : s) v = 1.f + 0.5f * u(g);
        for (auto& v : t) v = 0.5f * u(g);
    }
    opfuse::TensorView<const float, 4> xv() const { return opfuse::nhwc<const float>(x.data(), 1, shape.h, shape.w, shape.c); }
    opfuse::TensorView<const float, 4> rv() const { return opfuse::nhwc<const float>(r.data(), 1, shape.h, shape.w, shape.c); }
    opfuse::TensorView<float, 4> yv() { return opfuse::nhwc(y.data(), 1, shape.h, shape.w, shape.c); }
};

expr_data& expr_data_for(const expr_shape& s) {
    static std::map<std::string, std::unique_ptr<expr_data>> cache;
    auto& p = cache[s.name];
    if (!p) p = std::make_unique<expr_data>(s);
    return *p;
}

enum class variant { fused, fused_regular, fused_streaming, unfused };

template <class Exec>
void run_once(expr_data& d, variant v, Exec& exec) {
    const auto X = ex::tensor(d.xv()), R = ex::tensor(d.rv());
    const auto S = ex::per_channel(d.s), T = ex::per_channel(d.t);
    const auto Y = d.yv();
    switch (v) {
        case variant::fused: ex::assign(Y, ex::relu(X * S + T + R), exec); break;
        case variant::fused_regular: ex::assign(Y, ex::relu(X * S + T + R), exec, ex::store_policy::regular); break;
        case variant::fused_streaming:
            ex::assign(Y, ex::relu(X * S + T + R), exec, ex::store_policy::streaming);
            break;
        case variant::unfused: {
            const auto Yin = ex::tensor(Y);
            ex::assign(Y, X * S, exec);
            ex::assign(Y, Yin + T, exec);
            ex::assign(Y, Yin + R, exec);
            ex::assign(Y, ex::relu(Yin), exec);
            break;
        }
    }
}

void bench_expr(benchmark::State& state, const expr_shape& shape, variant v, bool two_threads) {
    expr_data& d = expr_data_for(shape);
    opfuse::serial_executor serial;
    for (auto _ : state) {
        if (two_threads)
            run_once(d, v, pool2());
        else
            run_once(d, v, serial);
        benchmark::ClobberMemory();
    }
    state.counters["bytes/s"] = benchmark::Counter(3.0 * double(shape.size()) * sizeof(float),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}

const char* to_string(variant v) {
    switch (v) {
        case variant::fused: return "fused";
        case variant::fused_regular: return "fused_regular";
        case variant::fused_streaming: return "fused_streaming";
        case variant::unfused: return "unfused";
    }
    return "?";
}

// Registered at static initialisation (before main() registers the rest of the suite).
const bool registered = [] {
    for (bool t2 : {false, true})
        for (const expr_shape& s : kExprShapes)
            for (variant v : {variant::fused, variant::fused_regular, variant::fused_streaming, variant::unfused}) {
                const std::string name =
                    std::string("expr/relu_affine_add/") + s.name + "/" + to_string(v) + (t2 ? "/t2" : "");
                benchmark::RegisterBenchmark(name.c_str(),
                                             [&s, v, t2](benchmark::State& st) { bench_expr(st, s, v, t2); })
                    ->UseRealTime()
                    ->Unit(s.size() > (1 << 20) ? benchmark::kMillisecond : benchmark::kMicrosecond);
            }
    return true;
}();

}  // namespace
}  // namespace opfuse_bench
