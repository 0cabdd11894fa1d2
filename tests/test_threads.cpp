// Executors: results are bitwise identical (memcmp) whatever runs the tasks: the serial executor,
// thread_pool(1), thread_pool(2) and thread_pool(3) (more threads than this machine's cores too), for
// dense, 1x1, depthwise, grouped and NCHW layers, fused and unfused, and over repeated calls on one pool.
#include "support.hpp"

using namespace test;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::unfused;

namespace {

// One chain type for the whole file (each fused<> type costs ~10 s to compile).
using Fused = fused<Conv2d, opfuse::BatchNorm, opfuse::Add, opfuse::SiLU>;

struct ThreadCase {
    const char* name;
    ConvCase cc;
    Store in, out;
};

std::vector<ThreadCase> cases() {
    std::vector<ThreadCase> v;
    ConvCase c;
    c.cin = 17, c.cout = 65, c.kh = c.kw = 3, c.pad = 1, c.n = 3, c.h = 13, c.w = 11;
    v.push_back({"dense 3x3 NHWC", c, Store::NHWC, Store::NHWC});
    v.push_back({"dense 3x3 NCHW", c, Store::NCHW, Store::NCHW});  // flattened planes on AVX-512: 6 tasks
    v.push_back({"dense 3x3 NHWC -> NCHW", c, Store::NHWC, Store::NCHW});
    c.cin = 1900, c.cout = 24, c.h = 7, c.w = 9;  // reduced in passes over kernel rows (conv2d_direct.hpp)
    v.push_back({"dense 3x3 NHWC, weights split by kernel rows", c, Store::NHWC, Store::NHWC});
    // Whole-image bands (conv2d_image_band.hpp): the blocks per task follow the thread count (SSE2: 5 blocks
    // as 1, 2 or 3 tasks), the input-channel slices must not.
    c = {};
    c.cin = 700, c.cout = 40, c.kh = c.kw = 5, c.pad = 2, c.n = 1, c.h = 5, c.w = 6;
    v.push_back({"dense 5x5 NCHW, whole-image bands", c, Store::NCHW, Store::NCHW});
    c = {};
    c.cin = 64, c.cout = 17, c.n = 2, c.h = 20, c.w = 7;
    v.push_back({"1x1 NHWC", c, Store::NHWC, Store::NHWC});
    v.push_back({"1x1 NCHW", c, Store::NCHW, Store::NCHW});
    c = {};
    c.cin = c.cout = c.groups = 65, c.kh = c.kw = 3, c.pad = 1, c.sh = c.sw = 2, c.n = 2, c.h = 20, c.w = 13;
    v.push_back({"depthwise NHWC", c, Store::NHWC, Store::NHWC});
    v.push_back({"depthwise NCHW", c, Store::NCHW, Store::NCHW});
    v.push_back({"depthwise channel slices", c, Store::NHWCSlice, Store::NHWCSlice});
    c.cin = c.cout = c.groups = 3, c.sh = c.sw = 1, c.n = 1;  // 3 planes of 17 vectors, split into ranges of vectors
    v.push_back({"depthwise 3x3 NCHW, flattened planes", c, Store::NCHW, Store::NCHW});
    c = {};
    c.cin = 34, c.cout = 14, c.groups = 2, c.kh = c.kw = 5, c.pad = 2, c.n = 1, c.h = 13, c.w = 11;
    v.push_back({"grouped NCHW", c, Store::NCHW, Store::NCHWPitch});
    return v;
}

// A user executor: runs the tasks in reverse order (the result must not depend on the task order).
struct reverse_executor {
    int num_threads() const { return 1; }
    template <class F>
    void parallel_for(index_t n, F&& f) const {
        for (index_t i = n - 1; i >= 0; --i) f(i);
    }
};

bool bitwise_equal(const Tensor& a, const Tensor& b) {
    return a.buf.size() == b.buf.size() && std::memcmp(a.buf.data(), b.buf.data(), a.buf.size() * sizeof(float)) == 0;
}

template <class Composition, class... Specs>
void check_executors(const Layer<Specs...>& layer, Store in, Store out, opfuse::thread_pool* const (&pools)[3]) {
    opfuse::serial_executor serial;
    const ChainRun base = layer.template run<Composition>(in, out, Store::NCHW, true, serial);
    INFO("serial: " << base.cmp.detail);
    REQUIRE(base.cmp.ok);
    for (opfuse::thread_pool* pool : pools) {
        INFO("thread_pool(" << pool->num_threads() << ")");
        for (int rep = 0; rep < 3; ++rep) {
            const ChainRun r = layer.template run<Composition>(in, out, Store::NCHW, true, *pool);
            CHECK(bitwise_equal(r.out, base.out));
        }
    }
}

}  // namespace

TEST_CASE("threads: serial and thread_pool(1, 2, 3) give bitwise identical outputs", "[threads]") {
    opfuse::thread_pool p1(1), p2(2), p3(3);
    opfuse::thread_pool* const pools[3] = {&p1, &p2, &p3};
    CHECK(p1.num_threads() == 1);
    CHECK(p2.num_threads() == 2);
    CHECK(p3.num_threads() == 3);
    for (const ThreadCase& t : cases()) {
        INFO(t.name << ": " << t.cc.str());
        const Layer<BatchNormSpec, AddSpec, SiLUSpec> layer(t.cc, 11, activation_weight_scale(t.cc));
        check_executors<Fused>(layer, t.in, t.out, pools);
        check_executors<unfused<Conv2d, opfuse::BatchNorm, opfuse::Add, opfuse::SiLU>>(layer, t.in, t.out, pools);
    }
}

TEST_CASE("threads: one pool, many consecutive calls of different layers", "[threads]") {
    opfuse::thread_pool pool(3);
    opfuse::serial_executor serial;
    const auto all = cases();
    std::vector<Layer<BatchNormSpec, AddSpec, SiLUSpec>> layers;
    std::vector<Tensor> expected;
    for (const ThreadCase& t : all) {
        layers.emplace_back(t.cc, 13);
        expected.push_back(layers.back().run<Fused>(t.in, t.out, t.in, true, serial).out);
    }
    for (int rep = 0; rep < 20; ++rep)
        for (std::size_t i = 0; i < all.size(); ++i) {
            INFO(all[i].name << " repetition " << rep);
            const ChainRun r = layers[i].run<Fused>(all[i].in, all[i].out, all[i].in, true, pool);
            REQUIRE(bitwise_equal(r.out, expected[i]));
        }
}

TEST_CASE("threads: a user executor with the two-function interface", "[threads]") {
    static_assert(opfuse::is_executor_v<reverse_executor>);
    reverse_executor rev;
    opfuse::serial_executor serial;
    for (const ThreadCase& t : cases()) {
        INFO(t.name);
        const Layer<BatchNormSpec, AddSpec, SiLUSpec> layer(t.cc, 14, activation_weight_scale(t.cc));
        const ChainRun a = layer.run<Fused>(t.in, t.out, Store::NHWC, true, serial);
        const ChainRun b = layer.run<Fused>(t.in, t.out, Store::NHWC, true, rev);
        CHECK(a.cmp.ok);
        CHECK(bitwise_equal(a.out, b.out));
    }
}
