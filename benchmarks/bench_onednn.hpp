// Shared by the oneDNN peer entries (bench_onednn.cpp: convolutions, bench_onednn_linear.cpp: matmul).
#pragma once

#include <omp.h>

#include <exception>
#include <memory>

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace opfuse_bench {

// The CPU engine every oneDNN entry runs on.
dnnl::engine& onednn_engine();

// Threads of this process now (counted in /proc/self/task): the `os_threads` counter of oneDNN entries.
int os_threads();

// The body of every oneDNN entry. `Primitive` has run(stream&), `max_abs_diff` and `impl`; make(stream&)
// builds it (and compares it with opfuse) on the entry's first call, outside the timing. The OpenMP thread
// count is set before building (oneDNN sizes its work split at creation) and before running, and put back
// to 1 afterwards. Reports max_abs_diff and os_threads and labels the entry with oneDNN's implementation;
// the caller adds the FLOP/s and bytes/s counters. Returns false when building or running failed.
template <class Primitive, class Make>
bool run_onednn_entry(benchmark::State& state, int threads, std::unique_ptr<Primitive>& cached, const Make& make) {
    omp_set_num_threads(threads);
    dnnl::stream st(onednn_engine());
    try {
        if (!cached) cached = make(st);
        cached->run(st);  // warm-up, never timed
        st.wait();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        omp_set_num_threads(1);
        return false;
    }
    for (auto _ : state) {
        cached->run(st);
        st.wait();
    }
    state.counters["max_abs_diff"] = cached->max_abs_diff;
    state.counters["os_threads"] = os_threads();
    state.SetLabel(cached->impl);
    omp_set_num_threads(1);
    return true;
}

}  // namespace opfuse_bench
