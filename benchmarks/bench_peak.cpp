// This machine's limits, measured in the same run as the convolutions so that every conv row can be put
// as a fraction of them:
//   peak/fma_<isa>       independent xsimd::fma chains on registers, 1 thread           -> FLOP/s
//   peak/fma_<isa>/t2    the same on both threads of pool2()                             -> FLOP/s
//   peak/stream_copy     a[i] = b[i],           256 MiB arrays, 1 thread                 -> bytes/s
//   peak/stream_triad    a[i] = b[i] + s*c[i],  256 MiB arrays, 1 thread                 -> bytes/s
// STREAM counts bytes the STREAM way: 2 (copy) or 3 (triad) arrays per iteration, write-allocate traffic
// not counted. The arrays are allocated and first-touched once, outside the timed loop.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace opfuse_bench {
namespace {

using B = xsimd::batch<float>;
constexpr int S = int(B::size);
// Enough chains to cover FMA latency x FMA ports (4 cycles x 2 pipes on Zen 4/5, Intel alike) twice over,
// while the accumulators and the two operands still fit the register file without spills:
// 16 with 32 registers (AVX-512), 12 with 16 (AVX2, SSE).
constexpr int kChains = S >= 16 ? 16 : 12;
constexpr std::int64_t kRounds = 1 << 18;  // rounds of kChains FMAs per call (~0.6 ms: pool wake-up is noise)
constexpr double kFlopsPerCall = 2.0 * S * kChains * double(kRounds);

// Kept out of line so its loop can be checked in the disassembly (objdump -d --no-show-raw-insn
// opfuse_bench | grep -A60 fma_chains): only vfmadd on registers, no stack loads or stores in the loop.
__attribute__((noinline)) float fma_chains(float a, float b, std::int64_t rounds) {
    B acc[kChains];
    opfuse::detail::static_for<kChains>([&](auto i) { acc[i] = B(float(int(i)) * 1e-3f); });
    const B va(a), vb(b);
    for (std::int64_t r = 0; r < rounds; ++r)
        opfuse::detail::static_for<kChains>([&](auto i) { acc[i] = xsimd::fma(acc[i], va, vb); });
    B sum(0.f);
    opfuse::detail::static_for<kChains>([&](auto i) { sum += acc[i]; });
    return xsimd::hadd(sum);
}

// a < 1 and b small: every chain converges to b / (1 - a) and never overflows or goes denormal.
volatile float g_a = 0.999f, g_b = 1e-3f;

void fma_peak(benchmark::State& state, int threads) {
    const float a = g_a, b = g_b;
    float sink[2] = {0.f, 0.f};
    if (threads == 2) pool2();
    for (auto _ : state) {
        if (threads == 2)
            pool2().parallel_for(2, [&](opfuse::index_t t) { sink[t] += fma_chains(a, b, kRounds); });
        else
            sink[0] += fma_chains(a, b, kRounds);
    }
    benchmark::DoNotOptimize(sink);
    state.counters["FLOP/s"] =
        benchmark::Counter(kFlopsPerCall * threads, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["chains"] = kChains;
    state.counters["lanes"] = S;
}

constexpr std::size_t kStreamFloats = std::size_t(256) << 20 >> 2;  // 256 MiB per array

struct stream_arrays {
    opfuse::aligned_buffer a, b, c;  // zero-filled on construction: first touch happens here
    stream_arrays() : a(kStreamFloats), b(kStreamFloats), c(kStreamFloats) {
        for (std::size_t i = 0; i < kStreamFloats; ++i) b[i] = 1.f, c[i] = 2.f;
    }
};

stream_arrays& arrays() {
    static stream_arrays s;
    return s;
}

// GCC would turn the copy loop into a memcpy call, whose non-temporal stores are not what STREAM measures.
#if defined(__GNUC__) && !defined(__clang__)
#define OPFUSE_BENCH_PLAIN_LOOP __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#else
#define OPFUSE_BENCH_PLAIN_LOOP __attribute__((noinline))
#endif

OPFUSE_BENCH_PLAIN_LOOP void stream_copy(float* __restrict a, const float* __restrict b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i];
}

OPFUSE_BENCH_PLAIN_LOOP void stream_triad(float* __restrict a, const float* __restrict b,
                                          const float* __restrict c, float s, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

void stream(benchmark::State& state, bool triad) {
    stream_arrays& s = arrays();
    volatile float scalar = 3.f;
    const float k = scalar;
    for (auto _ : state) {
        if (triad)
            stream_triad(s.a.data(), s.b.data(), s.c.data(), k, kStreamFloats);
        else
            stream_copy(s.a.data(), s.b.data(), kStreamFloats);
        benchmark::ClobberMemory();
    }
    const double bytes = double(kStreamFloats) * sizeof(float) * (triad ? 3 : 2);
    state.counters["bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

// Limits are best cases: besides the usual aggregates, report the best repetition ("max" of the rate
// counters), which is what benchmarks/report uses as the peak when it is there.
double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

// The FMA peak entries; `suffix` tells a second measurement apart (see register_fma_peak_again).
void register_fma_peak(const std::string& suffix) {
    std::string isa = xsimd::default_arch::name();  // "avx512bw", "fma3+avx2", ...
    for (char& ch : isa)
        if (ch == '+') ch = '_';
    const std::string fma = "peak/fma_" + isa + suffix;
    benchmark::RegisterBenchmark(fma.c_str(), [](benchmark::State& st) { fma_peak(st, 1); })
        ->ComputeStatistics("max", max_of)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((fma + "/t2").c_str(), [](benchmark::State& st) { fma_peak(st, 2); })
        ->ComputeStatistics("max", max_of)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace

// The clock of a shared VM drifts between phases of one run (a peak entry at the start read 190 GFLOP/s
// while the convs after it reached 212), so the FMA peak is measured again at the end and the report
// takes the higher of the two.
void register_fma_peak_again() { register_fma_peak("@end"); }

void register_peak_benchmarks() {
    register_fma_peak("");
    benchmark::RegisterBenchmark("peak/stream_copy", [](benchmark::State& st) { stream(st, false); })
        ->ComputeStatistics("max", max_of)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("peak/stream_triad", [](benchmark::State& st) { stream(st, true); })
        ->ComputeStatistics("max", max_of)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace opfuse_bench
