// No heap allocation after construction: once a fused<> / unfused<> layer and the thread pool exist,
// calling the layer must not allocate, on any thread. This program replaces every global operator
// new/new[] (plain, nothrow, aligned) and, through the linker's --wrap (see CMakeLists.txt), the malloc
// family called from the header-only library code, and counts calls while counting is switched on.
// Exit code 0 when every scenario made zero allocations.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include <opfuse/opfuse.hpp>

extern "C" {
void* __real_malloc(std::size_t);
void* __real_calloc(std::size_t, std::size_t);
void* __real_realloc(void*, std::size_t);
void* __real_aligned_alloc(std::size_t, std::size_t);
int __real_posix_memalign(void**, std::size_t, std::size_t);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void note() {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
void* allocate(std::size_t n) {
    note();
    if (void* p = __real_malloc(n ? n : 1)) return p;  // (std::malloc here would be counted twice)
    throw std::bad_alloc();
}
void* allocate_aligned(std::size_t n, std::align_val_t a) {
    note();
    const std::size_t al = static_cast<std::size_t>(a) < sizeof(void*) ? sizeof(void*) : static_cast<std::size_t>(a);
    void* p = nullptr;
    if (__real_posix_memalign(&p, al, n ? n : 1) != 0) throw std::bad_alloc();
    return p;
}
}  // namespace

// --- the malloc family, for calls compiled in this translation unit (-Wl,--wrap=...) ---
extern "C" {
void* __wrap_malloc(std::size_t n) { note(); return __real_malloc(n); }
void* __wrap_calloc(std::size_t n, std::size_t s) { note(); return __real_calloc(n, s); }
void* __wrap_realloc(void* p, std::size_t n) { note(); return __real_realloc(p, n); }
void* __wrap_aligned_alloc(std::size_t a, std::size_t n) { note(); return __real_aligned_alloc(a, n); }
int __wrap_posix_memalign(void** p, std::size_t a, std::size_t n) { note(); return __real_posix_memalign(p, a, n); }
}

// --- global operator new / delete ---
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try { return allocate(n); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    try { return allocate(n); } catch (...) { return nullptr; }
}
void* operator new(std::size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try { return allocate_aligned(n, a); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try { return allocate_aligned(n, a); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

int failures = 0;

// Counts the allocations made by `call` (run 3 times: the first call is not allowed to allocate either).
template <class F>
void expect_no_allocation(const std::string& what, F&& call) {
    allocations = 0;
    counting = true;
    for (int i = 0; i < 3; ++i) call();
    counting = false;
    const long n = allocations.load();
    std::printf("%-70s %ld allocation(s)\n", what.c_str(), n);
    if (n != 0) ++failures;
}

std::vector<float> values(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7919 % 201) - 100) / 100.f;
    return v;
}

}  // namespace

int main() {
    using namespace opfuse;
    // the harness must see allocations: a std::string and a std::vector made while counting
    {
        allocations = 0;
        counting = true;
        std::vector<float> probe(1000);
        std::string s(100, 'x');
        void* volatile p = std::aligned_alloc(64, 256);  // volatile: GCC may elide an unused alloc/free pair
        counting = false;
        std::free(p);
        std::printf("%-70s %ld allocation(s)\n", "self-check (vector + string + aligned_alloc, expect 3)", allocations.load());
        if (allocations.load() != 3) ++failures;
    }

    thread_pool pool2(2), pool3(3);
    serial_executor serial;

    // dense 3x3, 17 -> 65 channels, NHWC, with a residual Add
    const index_t N = 2, H = 13, W = 11, C = 17, K = 65;
    const std::vector<float> w = values(std::size_t(K * C * 9), 0.1f), x = values(std::size_t(N * H * W * C), 1.f);
    const std::vector<float> res = values(std::size_t(N * H * W * K), 0.5f), ones(std::size_t(K), 1.f),
                             zeros(std::size_t(K), 0.f), bias = values(std::size_t(K), 0.3f);
    std::vector<float> y(std::size_t(N * H * W * K));
    conv2d_params p;
    p.in_channels = C, p.out_channels = K, p.kernel = 3, p.padding = 1, p.weights = w;
    const BatchNorm::params bn{ones, bias, zeros, ones, 1e-5f};
    const fused<Conv2d, BatchNorm, Add, Relu> dense(p, bn, {}, {});
    const unfused<Conv2d, BatchNorm, Add, Relu> dense_unfused(p, bn, {}, {});
    const auto in = nhwc(x.data(), N, H, W, C);
    const auto out = nhwc(y.data(), N, H, W, K);
    const auto r = nhwc(res.data(), N, H, W, K);
    // the argument check that every call starts with, on its own (narrows down a failure below)
    expect_no_allocation("  Conv2d::check(in, out) alone (argument validation of every call)",
                         [&] { dense.main_op().check(in, out); });
    expect_no_allocation("fused<Conv2d, BatchNorm, Add, Relu> dense NHWC, default (serial)", [&] { dense(in, out, r); });
    expect_no_allocation("  ... serial_executor", [&] { dense(in, out, r, serial); });
    expect_no_allocation("  ... thread_pool(2)", [&] { dense(in, out, r, pool2); });
    expect_no_allocation("  ... thread_pool(3)", [&] { dense(in, out, r, pool3); });
    expect_no_allocation("unfused<Conv2d, BatchNorm, Add, Relu> dense NHWC, thread_pool(2)",
                         [&] { dense_unfused(in, out, r, pool2); });
    // the same layer on NCHW tensors
    const auto in_nchw = nchw(x.data(), N, C, H, W);
    const auto out_nchw = nchw(y.data(), N, K, H, W);
    const auto r_nchw = nchw(res.data(), N, K, H, W);
    expect_no_allocation("fused<Conv2d, BatchNorm, Add, Relu> dense NCHW, serial", [&] { dense(in_nchw, out_nchw, r_nchw); });
    expect_no_allocation("  ... thread_pool(3)", [&] { dense(in_nchw, out_nchw, r_nchw, pool3); });

    // depthwise 3x3, 65 channels, NHWC, with a residual Add
    const std::vector<float> wd = values(std::size_t(K * 9), 0.2f), xd = values(std::size_t(N * H * W * K), 1.f);
    conv2d_params pd;
    pd.in_channels = pd.out_channels = pd.groups = K, pd.kernel = 3, pd.padding = 1, pd.weights = wd;
    const fused<Conv2d, BiasAdd, Add, Relu6> depthwise(pd, {bias}, {}, {});
    const auto ind = nhwc(xd.data(), N, H, W, K);
    expect_no_allocation("fused<Conv2d, BiasAdd, Add, Relu6> depthwise NHWC, serial", [&] { depthwise(ind, out, r); });
    expect_no_allocation("  ... thread_pool(2)", [&] { depthwise(ind, out, r, pool2); });
    expect_no_allocation("  ... thread_pool(3)", [&] { depthwise(ind, out, r, pool3); });

    std::printf(failures ? "FAILED: %d scenario(s) allocated\n" : "OK\n", failures);
    return failures ? 1 : 0;
}
