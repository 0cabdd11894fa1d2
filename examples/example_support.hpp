// Helpers shared by the examples: command-line flags, seeded data, median latency, and the fused-vs-
// unfused agreement check. Not part of the library.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <opfuse/parallel/executor.hpp>
#include <opfuse/parallel/thread_pool.hpp>

namespace example {

struct options {
    bool small = false;  // --small: CI size (smaller tensors, fewer repetitions)
    int threads = 1;     // --threads N: run on an opfuse::thread_pool of N threads
    int reps = 15;       // --reps N: timed repetitions (the median is printed)
};

inline options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") {
            o.small = true;
            o.reps = 3;
        } else if (a == "--threads" && i + 1 < argc) {
            o.threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--reps" && i + 1 < argc) {
            o.reps = std::max(1, std::atoi(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: %s [--small] [--threads N] [--reps N]\n", argv[0]);
            std::exit(2);
        }
    }
    return o;
}

// Uniform values in [lo, hi), seeded: every run sees the same data.
inline std::vector<float> random_vector(std::size_t n, float lo, float hi, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// OIHW weights scaled by 1/sqrt(fan_in), so activations stay O(1) through a block.
inline std::vector<float> conv_weights(long out, long in_per_group, long kh, long kw, unsigned seed) {
    const float s = 1.f / std::sqrt(float(in_per_group * kh * kw));
    return random_vector(std::size_t(out * in_per_group * kh * kw), -s, s, seed);
}

// BatchNorm statistics of `c` channels in plausible ranges.
struct bn_stats {
    std::vector<float> gamma, beta, mean, var;
    bn_stats(long c, unsigned seed)
        : gamma(random_vector(std::size_t(c), 0.5f, 1.5f, seed)),
          beta(random_vector(std::size_t(c), -0.2f, 0.2f, seed + 1)),
          mean(random_vector(std::size_t(c), -0.2f, 0.2f, seed + 2)),
          var(random_vector(std::size_t(c), 0.5f, 2.f, seed + 3)) {}
};

// Median wall-clock time of `reps` calls of f (after one warm-up call), in milliseconds.
template <class F>
double median_ms(int reps, F&& f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto a = std::chrono::steady_clock::now();
        f();
        const auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Largest |a - b| relative to the largest |b| (at least 1): fused and unfused round differently (BN
// folded into the weights, one rounding instead of several), so they agree to a few ulps of the
// output's scale, not bitwise.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double scale = 1, diff = 0;
    for (float v : b) scale = std::max(scale, double(std::fabs(v)));
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        diff = (d > diff || std::isnan(d)) ? d : diff;
    }
    return diff / scale;
}

// Prints one comparison line; returns false (and says so) when the outputs differ by more than `tol`.
inline bool report(const char* what, double fused_ms, double unfused_ms, double rel_diff, double tol = 1e-4) {
    const bool ok = rel_diff <= tol;
    std::printf("%-40s fused %9.3f ms   unfused %9.3f ms   speed-up %5.2fx   max rel diff %.2e %s\n", what,
                fused_ms, unfused_ms, unfused_ms / fused_ms, rel_diff, ok ? "ok" : "MISMATCH");
    return ok;
}

// Calls run(opt, executor) on a thread_pool of opt.threads threads (serially for one thread) and turns
// its verdict into the exit code, printing `mismatch` to stderr when it reports a disagreement.
template <class Run>
int run_on_executor(const options& opt, Run&& run, const char* mismatch) {
    bool ok;
    if (opt.threads > 1) {
        opfuse::thread_pool pool(opt.threads);
        ok = run(opt, pool);
    } else {
        opfuse::serial_executor serial;
        ok = run(opt, serial);
    }
    if (!ok) std::fprintf(stderr, "%s\n", mismatch);
    return ok ? 0 : 1;
}

}  // namespace example
