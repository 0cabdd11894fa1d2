// Memory bounds: the kernels read only the input and operand tensors' own elements and write only the
// output's. Each tensor is placed in memory that starts (or ends) exactly at an inaccessible page
// (mmap + mprotect PROT_NONE), so any read or write past either end faults, in every build type, not
// only under AddressSanitizer. A fault terminates the test executable, so this file's test cases are
// separate CTest tests (catch_discover_tests) and a failure names the case.
#include <sys/mman.h>
#include <unistd.h>

#include "support.hpp"

using namespace test;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::unfused;

namespace {

// `count` floats whose first element (at_end = false) or one-past-last element (at_end = true) is
// the first byte of / right after an inaccessible page.
class GuardedFloats {
public:
    GuardedFloats(std::size_t count, bool at_end) {
        const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
        const std::size_t bytes = (count * sizeof(float) + page - 1) / page * page;
        size_ = bytes + 2 * page;
        void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(m != MAP_FAILED);
        base_ = static_cast<char*>(m);
        REQUIRE(mprotect(base_, page, PROT_NONE) == 0);
        REQUIRE(mprotect(base_ + page + bytes, page, PROT_NONE) == 0);
        data_ = reinterpret_cast<float*>(base_ + page + (at_end ? bytes - count * sizeof(float) : 0));
    }
    GuardedFloats(const GuardedFloats&) = delete;
    GuardedFloats& operator=(const GuardedFloats&) = delete;
    ~GuardedFloats() { munmap(base_, size_); }
    float* data() const { return data_; }

private:
    char* base_ = nullptr;
    std::size_t size_ = 0;
    float* data_ = nullptr;
};

// A dense tensor (NHWC or NCHW) in guarded memory holding the logical NCHW data `v`.
struct GuardedTensor {
    GuardedFloats mem;
    TensorView<float, 4> view;
    GuardedTensor(Store s, std::array<index_t, 4> shape, bool at_end, const std::vector<float>* v = nullptr)
        : mem(sz(shape[0] * shape[1] * shape[2] * shape[3]), at_end),
          view(opfuse::make_view(mem.data(), s == Store::NCHW ? opfuse::Layout::NCHW : opfuse::Layout::NHWC, shape[0],
                                 shape[1], shape[2], shape[3])) {
        const auto& t = view;
        std::size_t i = 0;
        for (index_t n = 0; n < t.n(); ++n)
            for (index_t c = 0; c < t.c(); ++c)
                for (index_t y = 0; y < t.h(); ++y)
                    for (index_t x = 0; x < t.w(); ++x, ++i) t(n, c, y, x) = v ? (*v)[i] : kSentinel;
    }
};

std::vector<ConvCase> cases() {
    std::vector<ConvCase> v;
    auto add = [&](index_t cin, index_t cout, index_t groups, index_t k, index_t s, index_t pad, index_t h, index_t w) {
        ConvCase c;
        c.cin = cin, c.cout = cout, c.groups = groups, c.kh = c.kw = k, c.sh = c.sw = s, c.pad = pad, c.h = h, c.w = w;
        c.n = 2;
        v.push_back(c);
    };
    add(17, 17, 17, 3, 1, 1, 5, 9);    // depthwise, 3x3 stride 1 specialization, row shorter than a tile
    add(65, 65, 65, 3, 2, 1, 13, 11);  // depthwise 3x3 stride 2
    add(16, 16, 16, 5, 1, 2, 20, 7);   // depthwise 5x5
    add(7, 7, 7, 7, 1, 3, 13, 11);     // depthwise, generic kernel (7x7)
    add(17, 65, 1, 3, 1, 1, 5, 9);     // dense
    add(64, 17, 1, 1, 1, 0, 13, 11);   // 1x1
    add(17, 34, 17, 3, 2, 1, 5, 9);    // channel multiplier
    return v;
}

void check_bounds(bool depthwise) {
    using Composition = fused<Conv2d, opfuse::Add, opfuse::Mul>;
    for (const ConvCase& cc : cases())
        for (Store s : {Store::NHWC, Store::NCHW}) {
            if ((cc.groups == cc.cin && cc.cout == cc.cin) != depthwise) continue;
            for (bool at_end : {true, false}) {
                INFO(cc.str() << " " << to_string(s) << (at_end ? ", tensors end" : ", tensors start")
                              << " at an inaccessible page");
                const Layer<AddSpec, MulSpec> layer(cc, 300);
                const auto os = cc.out_shape();
                const GuardedTensor in(s, {cc.n, cc.cin, cc.h, cc.w}, at_end, &layer.input);
                const GuardedTensor r(s, os, at_end, &layer.operand_data[0]);
                const GuardedTensor m(s, os, at_end, &layer.operand_data[1]);
                GuardedTensor out(s, os, at_end);
                const Composition f(cc.params(layer.weights), {}, {});
                f(in.view, out.view, r.view, m.view);
                const unfused<Conv2d, opfuse::Add, opfuse::Mul> u(cc.params(layer.weights), {}, {});
                GuardedTensor out2(s, os, at_end);
                u(in.view, out2.view, r.view, m.view);
                std::size_t i = 0, bad = 0;
                for (index_t n = 0; n < os[0]; ++n)
                    for (index_t c = 0; c < os[1]; ++c)
                        for (index_t y = 0; y < os[2]; ++y)
                            for (index_t x = 0; x < os[3]; ++x, ++i) {
                                const Val e = layer.expected[i];
                                bad += !(std::fabs(out.view(n, c, y, x) - e.v) <= e.err);
                                bad += !(std::fabs(out2.view(n, c, y, x) - e.v) <= e.err);
                            }
                CHECK(bad == 0);
            }
        }
}

}  // namespace

TEST_CASE("bounds: no access outside the input, operand and output tensors (dense, grouped)", "[bounds]") {
    check_bounds(false);
}
TEST_CASE("bounds: no access outside the input, operand and output tensors (depthwise)", "[bounds]") {
    check_bounds(true);
}

TEST_CASE("bounds: epilogues are only applied at output pixels (Site inside the output)", "[bounds][site]") {
    // The operands of Add/Mul are read at every Site the chain is applied to: a Site past the end of an
    // output row reads past the end of the operand tensor on the last row. Only the two operands are in
    // guarded memory here, so a fault is an operand read. Depthwise NHWC (the depthwise kernel), rows of
    // 4 output pixels (shorter than one register tile).
    ConvCase cc;
    cc.cin = cc.cout = cc.groups = 17, cc.kh = cc.kw = 3, cc.sh = cc.sw = 2, cc.pad = 1, cc.h = 20, cc.w = 7;
    const Layer<AddSpec, MulSpec> layer(cc, 301);
    const auto os = cc.out_shape();
    const Tensor in = input_tensor(Store::NHWC, cc.n, cc.cin, cc.h, cc.w, layer.input);
    Tensor out(Store::NHWC, os[0], os[1], os[2], os[3], kSentinel);
    const GuardedTensor r(Store::NHWC, os, true, &layer.operand_data[0]);
    const GuardedTensor m(Store::NHWC, os, true, &layer.operand_data[1]);
    const fused<Conv2d, opfuse::Add, opfuse::Mul> f(cc.params(layer.weights), {}, {});
    f(in.cview(), out.view, r.view, m.view);
    const Comparison cmp = compare(out, kSentinel, [&](std::size_t i) { return layer.expected[i]; });
    INFO(cmp.detail);
    CHECK(cmp.ok);
}
