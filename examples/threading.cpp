// Executors: the same fused layer and the same expression run serially (the default), on opfuse's
// thread_pool, on OpenMP (when this example is built with it) and on a user-written executor; the outputs
// must be bitwise identical whatever runs them. The snippets of docs/threading.md come from this file.
// Options: --small (CI), --threads N (at least 2; default 2), --reps N.
#include <opfuse/expr/expr.hpp>
#include <opfuse/opfuse.hpp>
#ifdef _OPENMP
#include <opfuse/parallel/openmp.hpp>
#endif

#include <cstring>
#include <thread>

#include "example_support.hpp"

using namespace opfuse;

// docs/threading.md, "Your own pool": any type with these two functions is an executor.
// (This one starts its threads on every call: simple, not fast. Adapt your real pool the same way.)
struct spawning_executor {
    int threads = 2;
    int num_threads() const { return threads; }
    template <class F>
    void parallel_for(index_t n, F&& f) const {
        std::vector<std::thread> helpers;
        for (int t = 1; t < threads; ++t)
            helpers.emplace_back([&, t] {
                for (index_t i = t; i < n; i += threads) f(i);  // tasks t, t + threads, ...
            });
        for (index_t i = 0; i < n; i += threads) f(i);  // the calling thread takes its share
        for (auto& h : helpers) h.join();
    }
};
static_assert(is_executor_v<spawning_executor>, "the two-function concept");

int main(int argc, char** argv) {
    example::options opt = example::parse(argc, argv);
    if (opt.threads < 2) opt.threads = 2;  // a pool of at least two threads
    const index_t hw = opt.small ? 14 : 56, c = 64;
    const auto w = example::conv_weights(c, c, 3, 3, 1);
    const example::bn_stats bn(c, 2);
    const auto x = example::random_vector(std::size_t(hw * hw * c), -1.f, 1.f, 3);
    std::vector<float> y(x.size()), z(x.size());

    conv2d_params p;
    p.in_channels = c, p.out_channels = c, p.kernel = 3, p.padding = 1, p.weights = w;
    const fused<Conv2d, BatchNorm, Relu> layer(p, {bn.gamma, bn.beta, bn.mean, bn.var}, {});
    const auto in = nhwc(x.data(), 1, hw, hw, c);
    const auto out = nhwc(y.data(), 1, hw, hw, c);
    const auto gate = expr::sigmoid(expr::tensor(in)) * expr::tensor(out);  // an expression over both
    const auto zv = nhwc(z.data(), 1, hw, hw, c);

    // docs/threading.md, "Serial by default" and "opfuse::thread_pool"
    layer(in, out);                              // serial: the calling thread only
    expr::assign(zv, gate);
    thread_pool pool(opt.threads);               // starts opt.threads - 1 workers, once
    layer(in, out, pool);                        // the same call, on the pool
    expr::assign(zv, gate, pool);

    std::printf("Conv 3x3 64->64 + BN + ReLU at %lldx%lld, then sigmoid(x) * y; median of %d\n", (long long)hw,
                (long long)hw, opt.reps);
    layer(in, out);  // the serial results every executor must reproduce to the bit
    expr::assign(zv, gate);
    const std::vector<float> y_ref = y, z_ref = z;
    bool ok = true;
    auto check = [&](const char* name, auto& exec) {
        std::fill(y.begin(), y.end(), 0.f);
        std::fill(z.begin(), z.end(), 0.f);
        const double ms = example::median_ms(opt.reps, [&] {
            layer(in, out, exec);
            expr::assign(zv, gate, exec);
        });
        const bool same = std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)) == 0 &&
                          std::memcmp(z.data(), z_ref.data(), z.size() * sizeof(float)) == 0;
        std::printf("%-28s %2d thread(s) %9.3f ms   %s\n", name, exec.num_threads(), ms,
                    same ? "bitwise identical to serial" : "DIFFERS FROM SERIAL");
        ok &= same;
    };
    serial_executor serial;
    check("serial_executor", serial);
    check("thread_pool", pool);
#ifdef _OPENMP
    // docs/threading.md, "OpenMP"
    openmp_executor omp;  // omp_get_max_threads() threads (OMP_NUM_THREADS)
    layer(in, out, omp);
    check("openmp_executor", omp);
#endif
    spawning_executor mine{opt.threads};
    layer(in, out, mine);  // docs/threading.md, "Your own pool"
    check("spawning_executor (user)", mine);
    return ok ? 0 : 1;
}
