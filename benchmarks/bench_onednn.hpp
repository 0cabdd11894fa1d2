// Shared by the oneDNN peer entries (bench_onednn.cpp: convolutions, bench_onednn_linear.cpp: matmul).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace opfuse_bench {

// The CPU engine every oneDNN entry runs on.
dnnl::engine& onednn_engine();

// Threads of this process now (counted in /proc/self/task): the `os_threads` counter of oneDNN entries.
int os_threads();

}  // namespace opfuse_bench
