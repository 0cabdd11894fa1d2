// DeepFuseNet, batch 1: 10 x [Conv2d 3x3 pad 1 (3->64, then 64->64) + BatchNorm + ReLU] at 224x224,
// flatten (PyTorch x.view(1, -1), NCHW order), then Linear(64*224*224 -> 10). The PyTorch module:
//
//   body = nn.Sequential(*[m for i in range(10) for m in (nn.Conv2d(3 if i == 0 else 64, 64, 3, padding=1),
//                                                         nn.BatchNorm2d(64), nn.ReLU())])
//   fc = nn.Linear(64 * 224 * 224, 10)
//
// Each block is one opfuse kernel, fused<Conv2d, BiasAdd, BatchNorm, Relu> (conv bias and BN folded into the
// packed weights at load time, ReLU on the registers); the head is fused<Linear, BiasAdd>, a GEMV that
// streams the 128 MB of fc weights once, split into fixed K chunks across threads.
//
// Layouts. Activations are NHWC (the fast conv layout); the first conv reads the NCHW input.bin directly
// through an opfuse::nchw view. PyTorch flattens the last activation in NCHW order; instead of making the
// last conv write NCHW (a strided, lane-by-lane store of 3.2M values on every call), the fc weights are
// permuted ONCE at load time from [10][C][H][W] to [10][H][W][C], so the head reads the NHWC activation as
// it is: the same result at zero cost per call.
//
// Weights: --dir PATH holds raw little-endian float32 files named after the state_dict keys,
// body.{3i}.weight (OIHW) / body.{3i}.bias for conv i, body.{3i+1}.{weight,bias,running_mean,running_var}
// for its BatchNorm, fc.weight, fc.bias, each as <key>.bin, plus input.bin (1x3xHxW NCHW); the output
// (10 floats) is written to PATH/output.bin. Without --dir the weights are seeded random. See
// docs/pytorch_export.md.
//
//   deepfusenet [--dir PATH] [--threads N] [--reps N] [--small] [--check]
// --small: 32x32 input, 3 repetitions, and --check: a scalar double-precision reference of the whole network
// (PyTorch's NCHW flatten with the unpermuted fc weights) that the fused output must match.
// Prints the fused and unfused latencies (median of reps) and exits non-zero if any check fails.
#include <opfuse/opfuse.hpp>
#include <opfuse/reference/conv2d.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <time.h>

namespace {

using opfuse::index_t;

constexpr int kBlocks = 10;
constexpr index_t kChannels = 64, kClasses = 10;
constexpr float kEps = 1e-5f;  // nn.BatchNorm2d default

struct options {
    std::string dir;
    int threads = 1, reps = 7;
    bool small = false, check = false;
};

options parse(int argc, char** argv) {
    options o;
    bool reps_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") {
            o.small = o.check = true;
        } else if (a == "--check") {
            o.check = true;
        } else if (a == "--threads" && i + 1 < argc) {
            o.threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--reps" && i + 1 < argc) {
            o.reps = std::max(1, std::atoi(argv[++i]));
            reps_given = true;
        } else if (a == "--dir" && i + 1 < argc) {
            o.dir = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--dir PATH] [--threads N] [--reps N] [--small] [--check]\n", argv[0]);
            std::exit(2);
        }
    }
    if (o.small && !reps_given) o.reps = 3;
    return o;
}

// ------------------------------------------------------------------------------------------- weights

struct bn_params {
    std::vector<float> gamma, beta, mean, var;
};
struct network_weights {
    index_t hw = 224;                  // input height = width
    std::vector<float> input;          // 1 x 3 x hw x hw, NCHW
    std::vector<float> conv_w[kBlocks], conv_b[kBlocks];
    bn_params bn[kBlocks];
    std::vector<float> fc_w, fc_b;     // fc_w as in PyTorch: [10][C][H][W]
};

std::vector<float> read_floats(const std::string& path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw std::runtime_error("cannot open " + path);
    const auto bytes = static_cast<std::size_t>(f.tellg());
    if (bytes % 4) throw std::runtime_error(path + ": size is not a multiple of 4 bytes");
    std::vector<float> v(bytes / 4);
    f.seekg(0);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
    return v;  // this example assumes a little-endian host (x86, ARM)
}

std::vector<float> read_key(const std::string& dir, const std::string& key, std::size_t expected) {
    auto v = read_floats(dir + "/" + key + ".bin");
    if (v.size() != expected)
        throw std::runtime_error(key + ".bin holds " + std::to_string(v.size()) + " floats, expected " +
                                 std::to_string(expected));
    return v;
}

index_t conv_in(int i) { return i == 0 ? 3 : kChannels; }

network_weights load(const std::string& dir) {
    network_weights w;
    w.input = read_floats(dir + "/input.bin");
    w.hw = index_t(std::lround(std::sqrt(double(w.input.size()) / 3)));
    if (3 * w.hw * w.hw != index_t(w.input.size()))
        throw std::runtime_error("input.bin must hold 1x3xHxW floats with H == W");
    for (int i = 0; i < kBlocks; ++i) {
        const std::string c = "body." + std::to_string(3 * i), b = "body." + std::to_string(3 * i + 1);
        w.conv_w[i] = read_key(dir, c + ".weight", std::size_t(kChannels * conv_in(i) * 9));
        w.conv_b[i] = read_key(dir, c + ".bias", kChannels);
        w.bn[i].gamma = read_key(dir, b + ".weight", kChannels);
        w.bn[i].beta = read_key(dir, b + ".bias", kChannels);
        w.bn[i].mean = read_key(dir, b + ".running_mean", kChannels);
        w.bn[i].var = read_key(dir, b + ".running_var", kChannels);
    }
    w.fc_w = read_key(dir, "fc.weight", std::size_t(kClasses * kChannels * w.hw * w.hw));
    w.fc_b = read_key(dir, "fc.bias", kClasses);
    return w;
}

std::vector<float> random_vector(std::size_t n, float lo, float hi, std::mt19937& g) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

network_weights random_weights(index_t hw) {
    network_weights w;
    w.hw = hw;
    std::mt19937 g(2026);
    w.input = random_vector(std::size_t(3 * hw * hw), -1.f, 1.f, g);
    for (int i = 0; i < kBlocks; ++i) {
        const float s = std::sqrt(2.f / float(conv_in(i) * 9));  // He init: activations stay O(1) through ReLU
        w.conv_w[i] = random_vector(std::size_t(kChannels * conv_in(i) * 9), -s * 1.7f, s * 1.7f, g);
        w.conv_b[i] = random_vector(kChannels, -0.1f, 0.1f, g);
        w.bn[i].gamma = random_vector(kChannels, 0.8f, 1.2f, g);
        w.bn[i].beta = random_vector(kChannels, -0.1f, 0.1f, g);
        w.bn[i].mean = random_vector(kChannels, -0.1f, 0.1f, g);
        w.bn[i].var = random_vector(kChannels, 0.8f, 1.2f, g);
    }
    const float s = 1.f / std::sqrt(float(kChannels * hw * hw));
    w.fc_w = random_vector(std::size_t(kClasses * kChannels * hw * hw), -s, s, g);
    w.fc_b = random_vector(kClasses, -0.1f, 0.1f, g);
    return w;
}

// [10][C][H][W] -> [10][H][W][C]: the fc then reads the NHWC activation in its memory order.
std::vector<float> fc_weights_for_nhwc(const std::vector<float>& w, index_t C, index_t H, index_t W) {
    std::vector<float> p(w.size());
    for (index_t o = 0; o < kClasses; ++o)
        for (index_t c = 0; c < C; ++c)
            for (index_t y = 0; y < H; ++y)
                for (index_t x = 0; x < W; ++x)
                    p[std::size_t(((o * H + y) * W + x) * C + c)] = w[std::size_t(((o * C + c) * H + y) * W + x)];
    return p;
}

// ------------------------------------------------------------------------------------------- network

opfuse::conv2d_params conv_params(const network_weights& w, int i) {
    opfuse::conv2d_params p;
    p.in_channels = conv_in(i);
    p.out_channels = kChannels;
    p.kernel = {3, 3};
    p.padding = opfuse::Padding(1);
    p.weights = w.conv_w[i];
    return p;
}

// The network as fused<> (Kind = opfuse::fused) or op-by-op (Kind = opfuse::unfused) layers.
template <template <class, class...> class Kind>
struct network {
    using block = Kind<opfuse::Conv2d, opfuse::BiasAdd, opfuse::BatchNorm, opfuse::Relu>;
    using head = Kind<opfuse::Linear, opfuse::BiasAdd>;
    std::vector<std::unique_ptr<block>> blocks;
    std::unique_ptr<head> fc;

    network(const network_weights& w, const std::vector<float>& fc_nhwc) {
        for (int i = 0; i < kBlocks; ++i) {
            const auto& bn = w.bn[i];
            blocks.push_back(std::make_unique<block>(conv_params(w, i), opfuse::BiasAdd::params{w.conv_b[i]},
                                                     opfuse::BatchNorm::params{bn.gamma, bn.beta, bn.mean, bn.var, kEps},
                                                     opfuse::Relu::params{}));
        }
        fc = std::make_unique<head>(opfuse::Linear::params{kChannels * w.hw * w.hw, kClasses, fc_nhwc},
                                    opfuse::BiasAdd::params{w.fc_b});
    }

    // input (NCHW) -> ping/pong (NHWC) -> logits. No allocation.
    template <class Exec>
    void operator()(const float* input, float* ping, float* pong, float* logits, index_t hw, Exec& exec) const {
        const auto act = [&](float* p) { return opfuse::nhwc(p, 1, hw, hw, kChannels); };
        (*blocks[0])(opfuse::nchw<const float>(input, 1, 3, hw, hw), act(ping), exec);
        float* src = ping;
        float* dst = pong;
        for (int i = 1; i < kBlocks; ++i) {
            (*blocks[std::size_t(i)])(opfuse::TensorView<const float, 4>(act(src)), act(dst), exec);
            std::swap(src, dst);
        }
        (*fc)(opfuse::matrix<const float>(src, 1, kChannels * hw * hw), opfuse::matrix(logits, 1, kClasses), exec);
    }
};

// PyTorch's forward in double precision, scalar: NCHW activations, BN with its own formula, flatten in NCHW
// order with the fc weights as given. Slow: for --small / --check.
std::vector<double> reference_forward(const network_weights& w) {
    const index_t hw = w.hw;
    std::vector<float> x = w.input;  // NCHW
    std::vector<double> y;
    for (int i = 0; i < kBlocks; ++i) {
        y = opfuse::reference::conv2d(conv_params(w, i), w.conv_w[i], opfuse::nchw<const float>(x.data(), 1, conv_in(i), hw, hw));
        x.assign(y.size(), 0.f);
        const auto& bn = w.bn[i];
        for (index_t c = 0; c < kChannels; ++c)
            for (index_t p = 0; p < hw * hw; ++p) {
                const std::size_t k = std::size_t(c * hw * hw + p);
                const std::size_t cc = std::size_t(c);
                const double v = (y[k] + w.conv_b[i][cc] - bn.mean[cc]) / std::sqrt(double(bn.var[cc]) + kEps) *
                                     bn.gamma[cc] + bn.beta[cc];
                y[k] = std::max(v, 0.0);
                x[k] = float(y[k]);
            }
    }
    std::vector<double> logits(kClasses);
    for (index_t o = 0; o < kClasses; ++o) {
        double s = w.fc_b[std::size_t(o)];
        for (std::size_t k = 0; k < y.size(); ++k) s += y[k] * w.fc_w[std::size_t(o) * y.size() + k];
        logits[std::size_t(o)] = s;
    }
    return logits;
}

// Median wall-clock time of `reps` calls of f (after one warm-up call), in milliseconds; `cpu_ms` gets the
// median process CPU time of the same calls (all threads): on a shared machine, wall time alone
// includes the time the OS gave to other processes.
template <class F>
double median_ms(int reps, F&& f, double* cpu_ms = nullptr) {
    auto cpu_now = [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
    };
    f();  // warm-up
    std::vector<double> t, c;
    for (int i = 0; i < reps; ++i) {
        const double c0 = cpu_now();
        const auto a = std::chrono::steady_clock::now();
        f();
        const auto b = std::chrono::steady_clock::now();
        c.push_back(cpu_now() - c0);
        t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    std::sort(c.begin(), c.end());
    if (cpu_ms) *cpu_ms = c[c.size() / 2];
    return t[t.size() / 2];
}

double max_rel_diff(const float* a, const double* b, std::size_t n) {
    double scale = 1e-3, diff = 0;
    for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(b[i]));
    for (std::size_t i = 0; i < n; ++i) {
        const double d = std::fabs(double(a[i]) - b[i]);
        if (d > diff || std::isnan(d)) diff = d;
    }
    return diff / scale;
}

}  // namespace

int main(int argc, char** argv) {
    const options opt = parse(argc, argv);
    network_weights w;
    try {
        w = opt.dir.empty() ? random_weights(opt.small ? 32 : 224) : load(opt.dir);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "deepfusenet: %s\n", e.what());
        return 2;
    }
    const index_t hw = w.hw;
    const std::vector<float> fc_nhwc = fc_weights_for_nhwc(w.fc_w, kChannels, hw, hw);
    const network<opfuse::fused> fused_net(w, fc_nhwc);
    const network<opfuse::unfused> unfused_net(w, fc_nhwc);

    // Activations: two NHWC buffers, allocated and first-touched once (aligned_buffer zero-fills).
    const auto act_size = std::size_t(hw * hw * kChannels);
    opfuse::aligned_buffer ping(act_size), pong(act_size);
    std::vector<float> logits(kClasses), logits_unfused(kClasses);
    opfuse::thread_pool pool(opt.threads);

    double cpu_fused = 0, cpu_unfused = 0;
    const double t_fused = median_ms(
        opt.reps, [&] { fused_net(w.input.data(), ping.data(), pong.data(), logits.data(), hw, pool); }, &cpu_fused);
    const double t_unfused = median_ms(
        opt.reps, [&] { unfused_net(w.input.data(), ping.data(), pong.data(), logits_unfused.data(), hw, pool); },
        &cpu_unfused);
    // The head alone (its input is whatever the last block left in the buffers: timing only).
    const double t_fc = median_ms(opt.reps, [&] {
        (*fused_net.fc)(opfuse::matrix<const float>(pong.data(), 1, kChannels * hw * hw),
                        opfuse::matrix(logits_unfused.data() + 0, 1, kClasses), pool);
    });
    unfused_net(w.input.data(), ping.data(), pong.data(), logits_unfused.data(), hw, pool);

    const double conv_gflop = 2.0 * double(hw * hw * kChannels * 9) * (3 + 9 * kChannels) * 1e-9;
    std::printf("DeepFuseNet 1x3x%ldx%ld, %d thread(s), median of %d (%s weights)\n", long(hw), long(hw), opt.threads,
                opt.reps, opt.dir.empty() ? "random" : opt.dir.c_str());
    std::printf("  fused   %9.2f ms  (process CPU %.2f ms; convs %.1f GFLOP/s; fc head alone %.2f ms = %.1f GB/s of "
                "weights)\n",
                t_fused, cpu_fused, conv_gflop / (t_fused - t_fc) * 1e3, t_fc, double(fc_nhwc.size()) * 4 / t_fc * 1e-6);
    std::printf("  unfused %9.2f ms  (process CPU %.2f ms)  fused speed-up %.2fx\n", t_unfused, cpu_unfused,
                t_unfused / t_fused);
    std::printf("  logits:");
    for (float v : logits) std::printf(" %.5g", v);
    std::printf("\n");

    bool ok = true;
    {
        std::vector<double> ref(logits_unfused.begin(), logits_unfused.end());
        const double d = max_rel_diff(logits.data(), ref.data(), ref.size());
        const bool agree = d <= 1e-4;
        std::printf("  fused vs unfused: max rel diff %.2e (tolerance 1e-4): %s\n", d, agree ? "ok" : "MISMATCH");
        ok &= agree;
    }
    if (opt.check) {
        const auto ref = reference_forward(w);
        const double d = max_rel_diff(logits.data(), ref.data(), ref.size());
        const bool agree = d <= 1e-4;
        std::printf("  fused vs double-precision reference (NCHW flatten): max rel diff %.2e (tolerance 1e-4): %s\n",
                    d, agree ? "ok" : "MISMATCH");
        ok &= agree;
    }
    if (!opt.dir.empty()) {
        const std::string path = opt.dir + "/output.bin";
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
        std::printf("  wrote %s\n", f ? path.c_str() : "NOTHING (cannot write output.bin)");
        ok &= bool(f);
    }
    return ok ? 0 : 1;
}
