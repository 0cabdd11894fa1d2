// opfuse::expr: standalone elementwise expressions against scalar double references.
//   - the anchor chain relu(x * s[c] + t[c] + r) over channel counts with and without vector tails
//     (C = 1, 3, 17, 64, 65), every storage of support.hpp (NHWC, NCHW, channel slice, row pitch) for the
//     output and the operands, mixed layouts, both store policies (which also covers each loop kind);
//   - every elementwise epilogue through apply<E>() and the named functions;
//   - the rest of the arithmetic (-, /, unary minus, numbers on either side, minimum, maximum);
//   - a tensor large enough for the automatic streaming-store path, at a misaligned address;
//   - bitwise identical results for 1, 2 and 3 threads; in-place evaluation; errors before any write.
#include <opfuse/expr/expr.hpp>
#include <opfuse/parallel/thread_pool.hpp>

#include "support.hpp"

namespace {

using namespace test;
namespace ex = opfuse::expr;
using opfuse::expr::store_policy;

const Store kStores[] = {Store::NHWC, Store::NCHW, Store::NHWCSlice, Store::NCHWPitch};

struct ChainData {
    index_t n, c, h, w;
    std::vector<float> x, r, s, t;  // x and r logical NCHW
    ChainData(index_t n_, index_t c_, index_t h_, index_t w_, std::uint32_t seed) : n(n_), c(c_), h(h_), w(w_) {
        std::mt19937 g(seed);
        x = activation_data(n, c, h, w, g);
        r = activation_data(n, c, h, w, g);
        s = uniform(sz(c), -2.f, 2.f, g);
        t = uniform(sz(c), -1.f, 1.f, g);
    }
    index_t channel_of(std::size_t i) const { return index_t(i) / (h * w) % c; }
    // relu(x*s + t + r) in double; at most three fp32 roundings of terms bounded by the absolute sum.
    Val expected(std::size_t i) const {
        const index_t ch = channel_of(i);
        const double xs = double(x[i]) * s[sz(ch)], v = xs + t[sz(ch)] + r[i];
        const double tol = 3 * u32 * (std::fabs(xs) + std::fabs(t[sz(ch)]) + std::fabs(r[i])) + kTiny;
        return {v > 0 ? v : 0, tol};
    }
};

std::string label(Store o, Store xs, Store rs, index_t c, store_policy p) {
    std::ostringstream os;
    os << "out " << to_string(o) << ", x " << to_string(xs) << ", r " << to_string(rs) << ", C=" << c
       << (p == store_policy::streaming ? ", streaming stores" : ", regular stores");
    return os.str();
}

Comparison run_chain(const ChainData& d, Store os, Store xs, Store rs, store_policy p) {
    const Tensor x = input_tensor(xs, d.n, d.c, d.h, d.w, d.x);
    const Tensor r = input_tensor(rs, d.n, d.c, d.h, d.w, d.r);
    Tensor out(os, d.n, d.c, d.h, d.w, kSentinel);
    const auto X = ex::tensor(x.cview()), R = ex::tensor(r.cview());
    const auto S = ex::per_channel(d.s), T = ex::per_channel(d.t);
    ex::assign(out.view, ex::relu(X * S + T + R), p);
    return compare(out, kSentinel, [&](std::size_t i) { return d.expected(i); });
}

}  // namespace

TEST_CASE("expr: relu(x * s[c] + t[c] + r) matches the double reference for every layout and C", "[expr]") {
    for (index_t c : {1, 3, 17, 64, 65}) {
        const ChainData d(2, c, 3, 5, std::uint32_t(100 + c));
        for (store_policy p : {store_policy::regular, store_policy::streaming}) {
            // every storage for all three tensors, then mixed layouts (the strided and pixel loops)
            for (Store s : kStores) {
                const Comparison cmp = run_chain(d, s, s, s, p);
                INFO(label(s, s, s, c, p) << ": " << cmp.detail);
                CHECK(cmp.ok);
            }
            const Store mixed[][3] = {{Store::NHWC, Store::NCHW, Store::NHWC},
                                      {Store::NCHW, Store::NHWC, Store::NCHWPitch},
                                      {Store::NHWCSlice, Store::NHWC, Store::NHWCSlice},
                                      {Store::NCHWPitch, Store::NCHW, Store::NCHW}};
            for (const auto& m : mixed) {
                const Comparison cmp = run_chain(d, m[0], m[1], m[2], p);
                INFO(label(m[0], m[1], m[2], c, p) << ": " << cmp.detail);
                CHECK(cmp.ok);
            }
        }
    }
}

TEST_CASE("expr: NHWC with more channels than the wrapped per-channel copy holds (pixel loop)", "[expr]") {
    // C > 512 leaves the flat loop; 515 also has a vector tail per pixel.
    for (index_t c : {515, 528}) {
        const ChainData d(1, c, 2, 3, std::uint32_t(7 + c));
        for (store_policy p : {store_policy::regular, store_policy::streaming}) {
            const Comparison cmp = run_chain(d, Store::NHWC, Store::NHWC, Store::NHWC, p);
            INFO(label(Store::NHWC, Store::NHWC, Store::NHWC, c, p) << ": " << cmp.detail);
            CHECK(cmp.ok);
        }
    }
}

namespace {

// y = E(x * s[c] + t[c]) through apply<E>, against the spec's reference step (support.hpp).
template <class Spec>
void check_epilogue(Store store, index_t c) {
    const ChainData d(1, c, 4, 5, 31);
    const EpData ep(c, 5);
    const Tensor x = input_tensor(store, d.n, d.c, d.h, d.w, d.x);
    Tensor out(store, d.n, d.c, d.h, d.w, kSentinel);
    const auto X = ex::tensor(x.cview());
    const auto S = ex::per_channel(d.s), T = ex::per_channel(d.t);
    ex::assign(out.view, ex::apply<typename Spec::type>(X * S + T, Spec::params(ep)));
    const RefStep f = Spec::ref(ep);
    const Comparison cmp = compare(out, kSentinel, [&](std::size_t i) {
        const index_t ch = d.channel_of(i);
        const double xs = double(d.x[i]) * d.s[sz(ch)], v = xs + d.t[sz(ch)];
        return f(Val{v, 2 * u32 * (std::fabs(xs) + std::fabs(d.t[sz(ch)]))}, ch, 0.0);
    });
    INFO(to_string(store) << " C=" << c << ": " << cmp.detail);
    CHECK(cmp.ok);
}

}  // namespace

TEMPLATE_TEST_CASE("expr: every elementwise epilogue through apply<E>()", "[expr]", ReluSpec, Relu6Spec, ClampSpec,
                   LeakyReluSpec, SigmoidSpec, TanhSpec, SiLUSpec, GeluErfSpec, GeluTanhSpec, HardSigmoidSpec,
                   HardSigmoidOnnxSpec, HardSwishSpec, EluSpec, MishSpec) {
    for (Store s : {Store::NHWC, Store::NCHW, Store::NCHWPitch})
        for (index_t c : {3, 17}) check_epilogue<TestType>(s, c);
}

TEST_CASE("expr: the named functions are the epilogues (bitwise)", "[expr]") {
    const index_t n = 1, c = 19, h = 3, w = 7;
    std::mt19937 g(3);
    std::vector<float> xv = activation_data(n, c, h, w, g);
    for (auto& v : xv) v *= 4.f;
    std::vector<float> a(xv.size()), b(xv.size());
    const auto X = ex::tensor(opfuse::nhwc<const float>(xv.data(), n, h, w, c));
    const auto A = opfuse::nhwc(a.data(), n, h, w, c), Bv = opfuse::nhwc(b.data(), n, h, w, c);
    auto same = [&](const char* name) {
        INFO(name);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    };
    using GA = opfuse::GELU::Approximate;
    ex::assign(A, ex::relu(X)), ex::assign(Bv, ex::apply<opfuse::Relu>(X)), same("relu");
    ex::assign(A, ex::relu6(X)), ex::assign(Bv, ex::apply<opfuse::Relu6>(X)), same("relu6");
    ex::assign(A, ex::clamp(X, -1.f, 2.f)), ex::assign(Bv, ex::apply<opfuse::Clamp>(X, {-1.f, 2.f})), same("clamp");
    ex::assign(A, ex::leaky_relu(X, 0.2f)), ex::assign(Bv, ex::apply<opfuse::LeakyRelu>(X, {0.2f})), same("leaky");
    ex::assign(A, ex::elu(X, 0.7f)), ex::assign(Bv, ex::apply<opfuse::Elu>(X, {0.7f})), same("elu");
    ex::assign(A, ex::sigmoid(X)), ex::assign(Bv, ex::apply<opfuse::Sigmoid>(X)), same("sigmoid");
    ex::assign(A, ex::tanh(X)), ex::assign(Bv, ex::apply<opfuse::Tanh>(X)), same("tanh");
    ex::assign(A, ex::silu(X)), ex::assign(Bv, ex::apply<opfuse::SiLU>(X)), same("silu");
    ex::assign(A, ex::gelu(X)), ex::assign(Bv, ex::apply<opfuse::GELU>(X, {GA::none})), same("gelu");
    ex::assign(A, ex::gelu(X, GA::tanh)), ex::assign(Bv, ex::apply<opfuse::GELU>(X, {GA::tanh})), same("gelu tanh");
    ex::assign(A, ex::hard_sigmoid(X)), ex::assign(Bv, ex::apply<opfuse::HardSigmoid>(X)), same("hard_sigmoid");
    ex::assign(A, ex::hard_swish(X)), ex::assign(Bv, ex::apply<opfuse::HardSwish>(X)), same("hard_swish");
    ex::assign(A, ex::mish(X)), ex::assign(Bv, ex::apply<opfuse::Mish>(X)), same("mish");
}

TEST_CASE("expr: arithmetic, numbers on either side, minimum and maximum", "[expr]") {
    const index_t n = 2, c = 5, h = 3, w = 4;
    std::mt19937 g(11);
    const std::vector<float> xv = activation_data(n, c, h, w, g), rv = activation_data(n, c, h, w, g);
    const std::vector<float> s = uniform(sz(c), 0.5f, 2.f, g);
    for (Store st : kStores) {
        const Tensor x = input_tensor(st, n, c, h, w, xv), r = input_tensor(st, n, c, h, w, rv);
        Tensor out(st, n, c, h, w, kSentinel);
        const auto X = ex::tensor(x.cview()), R = ex::tensor(r.cview());
        const auto S = ex::per_channel(s);
        // y = max(2 - x / (r*r + 1), -x * s) - min(r, 0.5) / s
        ex::assign(out.view, ex::maximum(2.f - X / (R * R + 1), -X * S) - ex::minimum(R, 0.5) / S);
        const Comparison cmp = compare(out, kSentinel, [&](std::size_t i) {
            const index_t ch = index_t(i) / (h * w) % c;
            const double xd = xv[i], rd = rv[i], sd = s[sz(ch)];
            const double a = 2 - xd / (rd * rd + 1), b = -xd * sd, m = std::min(rd, 0.5) / sd;
            const double v = std::max(a, b) - m;
            return Val{v, 8 * u32 * (std::fabs(a) + std::fabs(b) + std::fabs(m) + 2) + kTiny};
        });
        INFO(to_string(st) << ": " << cmp.detail);
        CHECK(cmp.ok);
    }
}

TEST_CASE("expr: broadcast-only expressions fill the output", "[expr]") {
    const std::vector<float> t = {1.f, -2.f, 3.5f};
    for (Store st : kStores) {
        Tensor out(st, 2, 3, 2, 5, kSentinel);
        ex::assign(out.view, ex::per_channel(t) * 2.f + 1);
        const Comparison cmp = compare(out, kSentinel, [&](std::size_t i) {
            return Val{2.0 * t[i / 10 % 3] + 1, 0.0};
        });
        INFO(to_string(st) << ": " << cmp.detail);
        CHECK(cmp.ok);
    }
}

TEST_CASE("expr: a large NHWC tensor takes the streaming-store path from a misaligned address", "[expr]") {
    // Two images of 160 x 128 x 64 floats (5 MiB each): a 10 MiB output, above the streaming threshold.
    const index_t h = 160, w = 128, c = 64;
    const std::size_t count = sz(h * w * c);
    STATIC_REQUIRE(ex::streaming_threshold_bytes <= 2 * 5 * (std::size_t(1) << 20));
    std::mt19937 g(42);
    const std::vector<float> xv = uniform(2 * count, -3.f, 3.f, g), rv = uniform(2 * count, -1.f, 1.f, g);
    const std::vector<float> s = uniform(sz(c), -2.f, 2.f, g), t = uniform(sz(c), -1.f, 1.f, g);
    // Two images side by side (N = 2), starting one float past an aligned address, so the output
    // needs the partial head before the aligned streaming stores.
    std::vector<float> y1(2 * count + 16, kSentinel), y2(2 * count + 16, kSentinel);
    const auto X = ex::tensor(opfuse::nhwc<const float>(xv.data(), 2, h, w, c));
    const auto R = ex::tensor(opfuse::nhwc<const float>(rv.data(), 2, h, w, c));
    const auto e = ex::relu(X * ex::per_channel(s) + ex::per_channel(t) + R);
    REQUIRE(count * 2 * sizeof(float) >= ex::streaming_threshold_bytes);
    ex::assign(opfuse::nhwc(y1.data() + 1, 2, h, w, c), e);  // automatic -> streaming
    opfuse::thread_pool pool(2);
    ex::assign(opfuse::nhwc(y2.data() + 1, 2, h, w, c), e, pool, store_policy::regular);
    std::size_t bad1 = 0, bad2 = 0;
    for (std::size_t i = 0; i < 2 * count; ++i) {
        const std::size_t ch = i % sz(c);
        const double xs = double(xv[i]) * s[ch], v = std::max(0.0, xs + t[ch] + rv[i]);
        const double tol = 3 * u32 * (std::fabs(xs) + std::fabs(t[ch]) + std::fabs(rv[i])) + kTiny;
        bad1 += !(std::fabs(y1[i + 1] - v) <= tol);
        bad2 += !(std::fabs(y2[i + 1] - v) <= tol);
    }
    CHECK(bad1 == 0);
    CHECK(bad2 == 0);
    CHECK(y1[0] == kSentinel);
    CHECK(y1[2 * count + 1] == kSentinel);
    CHECK(y2[0] == kSentinel);
    CHECK(y2[2 * count + 1] == kSentinel);
}

TEST_CASE("expr: results are bitwise identical for 1, 2 and 3 threads", "[expr][threads]") {
    const index_t n = 2, c = 17, h = 37, w = 29;
    const ChainData d(n, c, h, w, 9);
    opfuse::thread_pool pool2(2), pool3(3);
    for (Store st : kStores)
        for (Store rs : {Store::NHWC, Store::NCHW}) {
            const Tensor x = input_tensor(st, n, c, h, w, d.x), r = input_tensor(rs, n, c, h, w, d.r);
            const auto e = ex::silu(ex::tensor(x.cview()) * ex::per_channel(d.s) + ex::per_channel(d.t)) +
                           ex::tensor(r.cview());
            for (store_policy p : {store_policy::regular, store_policy::streaming}) {
                Tensor o1(st, n, c, h, w, kSentinel), o2(st, n, c, h, w, kSentinel), o3(st, n, c, h, w, kSentinel);
                ex::assign(o1.view, e, p);
                ex::assign(o2.view, e, pool2, p);
                ex::assign(o3.view, e, pool3, p);
                INFO("x/out " << to_string(st) << ", r " << to_string(rs)
                              << (p == store_policy::streaming ? ", streaming" : ", regular"));
                CHECK(std::memcmp(o1.buf.data(), o2.buf.data(), o1.buf.size() * sizeof(float)) == 0);
                CHECK(std::memcmp(o1.buf.data(), o3.buf.data(), o1.buf.size() * sizeof(float)) == 0);
            }
        }
}

TEST_CASE("expr: an element's value does not depend on layout, store policy or alignment (bitwise)", "[expr]") {
    // Every element goes through the same compiled vector code (channel tails and strided tensors are
    // staged into full vectors), so even a chain with transcendental functions agrees to the bit.
    const index_t n = 1, c = 19, h = 5, w = 6;
    const ChainData d(n, c, h, w, 21);
    std::vector<float> first;
    for (Store st : kStores)
        for (Store rs : {Store::NHWC, Store::NCHW})
            for (store_policy p : {store_policy::regular, store_policy::streaming}) {
                const Tensor x = input_tensor(st, n, c, h, w, d.x), r = input_tensor(rs, n, c, h, w, d.r);
                Tensor o(st, n, c, h, w, kSentinel);
                const auto X = ex::tensor(x.cview()), R = ex::tensor(r.cview());
                ex::assign(o.view, ex::gelu(ex::silu(X * ex::per_channel(d.s) + ex::per_channel(d.t)) * R + R), p);
                const std::vector<float> got = o.get();
                if (first.empty()) first = got;
                INFO("x/out " << to_string(st) << ", r " << to_string(rs));
                CHECK(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)) == 0);
            }
}

TEST_CASE("expr: the output may be one of the operands (in place, same strides)", "[expr]") {
    const ChainData d(1, 17, 3, 5, 77);
    for (Store st : kStores) {
        Tensor y = input_tensor(st, d.n, d.c, d.h, d.w, d.x);
        const Tensor r = input_tensor(st, d.n, d.c, d.h, d.w, d.r);
        const auto Y = ex::tensor(y.cview());
        ex::assign(y.view, ex::relu(Y * ex::per_channel(d.s) + ex::per_channel(d.t) + ex::tensor(r.cview())));
        const Comparison cmp = compare(y, std::numeric_limits<float>::quiet_NaN(),
                                       [&](std::size_t i) { return d.expected(i); });
        INFO(to_string(st) << ": " << cmp.detail);
        CHECK(cmp.bad == 0);
    }
}

TEST_CASE("expr: wrong shapes throw std::invalid_argument naming them, before anything is written", "[expr][errors]") {
    std::vector<float> x(2 * 4 * 4 * 8, 1.f), y(x.size(), kSentinel), s(8, 1.f), s7(7, 1.f);
    const auto out = opfuse::nhwc(y.data(), 2, 4, 4, 8);
    const auto X = ex::tensor(opfuse::nhwc<const float>(x.data(), 2, 4, 4, 8));
    const auto Xbad = ex::tensor(opfuse::nchw<const float>(x.data(), 2, 8, 4, 3));

    CHECK_THROWS_WITH(ex::assign(out, X + Xbad),
                      Catch::Contains("tensor operand #1") && Catch::Contains("NCHW(N=2, C=8, H=4, W=3)") &&
                          Catch::Contains("NHWC(N=2, C=8, H=4, W=4)"));
    CHECK_THROWS_AS(ex::assign(out, X + Xbad), std::invalid_argument);
    CHECK_THROWS_WITH(ex::assign(out, relu(X * ex::per_channel(s) + ex::per_channel(s7))),
                      Catch::Contains("per_channel operand #1 has 7 values") && Catch::Contains("C=8"));
    CHECK_THROWS_WITH(ex::assign(out, X + ex::tensor(opfuse::TensorView<const float, 4>(nullptr, {2, 8, 4, 4},
                                                                                       {128, 1, 32, 8}))),
                      Catch::Contains("tensor operand #1 is null"));
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == kSentinel; }));

    // An empty output is not an error: nothing to do.
    const auto X0 = ex::tensor(opfuse::nhwc<const float>(x.data(), 0, 4, 4, 8));
    CHECK_NOTHROW(ex::assign(opfuse::nhwc(y.data(), 0, 4, 4, 8), relu(X0 * 2.f)));
}
