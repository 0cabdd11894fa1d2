// Linear (GEMM / GEMV) with fused epilogues, against the scalar double-accumulating reference
// (opfuse/reference/linear.hpp, then the epilogue formulas of opfuse/reference/epilogues.hpp).
//
// Tolerance (u = 2^-24). The kernels sum K products in fp32 (FMA: exact product, one rounding per step;
// the GEMV path adds up to 16 lane sums and a few chunk sums on top). With A = sum_k |a_k w_k| + |b|:
//     |pre - ref| <= 8 u sqrt(K + 16) A + 4 u |ref|
// (a random-walk bound with > 10 sigma of margin, see tests/support.hpp for the same model on Conv2d);
// folding a BatchNorm scale s into W adds one rounding per weight, i.e. u |s| A. Each epilogue then maps
// (value, bound) to (f(value), Lip(f) * bound + own rounding), with own rounding 2u|y| for exact ops and
// 32u (|x| + |y|) for the transcendental GELU forms. A dropped or doubled product changes the result by
// about A / K, which is > 1000x this bound for every shape here.
//
// Threads: every call is repeated on thread_pool(2) and thread_pool(3) and must be bitwise identical.
#include <catch2/catch.hpp>

#include <opfuse/op/linear.hpp>
#include <opfuse/opfuse.hpp>
#include <opfuse/reference/epilogues.hpp>
#include <opfuse/reference/linear.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using opfuse::index_t;
using opfuse::TensorView;

constexpr double u32 = 0x1p-24;
constexpr float kSentinel = -777.25f;

std::size_t sz(index_t i) { return static_cast<std::size_t>(i); }

std::vector<float> uniform(std::size_t n, float lo, float hi, std::mt19937& g) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// A matrix in caller memory with a row pitch (ld >= cols) and sentinel-filled padding.
struct Matrix {
    index_t rows = 0, cols = 0, ld = 0;
    std::vector<float> buf;
    Matrix() = default;
    Matrix(index_t r, index_t c, index_t ld_, float fill = kSentinel)
        : rows(r), cols(c), ld(ld_), buf(sz(r * ld_ + 1), fill) {}
    TensorView<float, 2> view() { return {buf.data(), {rows, cols}, {ld, 1}}; }
    TensorView<const float, 2> cview() const { return {buf.data(), {rows, cols}, {ld, 1}}; }
    float& at(index_t r, index_t c) { return buf[sz(r * ld + c)]; }
    float at(index_t r, index_t c) const { return buf[sz(r * ld + c)]; }
    // Every element outside the view still holds the sentinel.
    bool padding_untouched() const {
        for (std::size_t i = 0; i < buf.size(); ++i) {
            const index_t r = index_t(i) / ld, c = index_t(i) % ld;
            if ((r >= rows || c >= cols) && buf[i] != kSentinel) return false;
        }
        return true;
    }
};

// Input rows get amplitudes in {0.03, 0.3, 1, 3}, so outputs span the linear and saturated parts of GELU.
Matrix input(index_t M, index_t K, index_t ld, std::mt19937& g) {
    static const float amp[4] = {0.03f, 0.3f, 1.f, 3.f};
    Matrix a(M, K, ld, 0.f);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (index_t m = 0; m < M; ++m)
        for (index_t k = 0; k < K; ++k) a.at(m, k) = d(g) * amp[(m + k / 7) % 4];
    return a;
}

// The reference value of every output element and its error bound, built step by step.
struct Expected {
    std::vector<double> val, tol;

    // pre = a . (w * scale)^T + shift, computed in double from the unfolded parameters.
    static Expected linear(const Matrix& a, const std::vector<float>& w, index_t N, const std::vector<float>& bias,
                           const std::vector<double>& fold_scale = {}) {
        const index_t M = a.rows, K = a.cols;
        Expected e;
        e.val = opfuse::reference::linear(a.cview(), w, N, bias);
        std::vector<float> aa(a.buf.size()), wa(w.size()), ba(bias.size());
        for (std::size_t i = 0; i < aa.size(); ++i) aa[i] = std::abs(a.buf[i]);
        for (std::size_t i = 0; i < wa.size(); ++i) wa[i] = std::abs(w[i]);
        for (std::size_t i = 0; i < ba.size(); ++i) ba[i] = std::abs(bias[i]);
        const TensorView<const float, 2> av{aa.data(), {M, K}, {a.ld, 1}};
        const auto mag = opfuse::reference::linear(av, wa, N, ba);
        e.tol.resize(e.val.size());
        for (std::size_t i = 0; i < e.val.size(); ++i) {
            const double s = fold_scale.empty() ? 1.0 : std::abs(fold_scale[i % sz(N)]);
            e.tol[i] = 8 * u32 * std::sqrt(double(K + 16)) * mag[i] * std::max(1.0, s) + 2 * u32 * s * mag[i] +
                       4 * u32 * std::abs(e.val[i]) + 1e-30;
        }
        return e;
    }

    // y = f(x) elementwise; `lip` bounds |f'|, `own(x, y)` is f's own rounding error.
    template <class F, class Own>
    Expected& apply(F f, double lip, Own own) {
        for (std::size_t i = 0; i < val.size(); ++i) {
            const double y = f(val[i], i);
            tol[i] = lip * tol[i] + own(val[i], y);
            val[i] = y;
        }
        return *this;
    }
    Expected& gelu(bool tanh_form) {
        return apply([&](double x, std::size_t) { return tanh_form ? opfuse::reference::gelu_tanh(x)
                                                                  : opfuse::reference::gelu_erf(x); },
                     1.13, [](double x, double y) { return 32 * u32 * (std::abs(x) + std::abs(y)) + 1e-30; });
    }
    Expected& relu() {
        return apply([](double x, std::size_t) { return opfuse::reference::relu(x); }, 1.0,
                     [](double, double) { return 0.0; });
    }
    Expected& batch_norm(const std::vector<float>& g, const std::vector<float>& b, const std::vector<float>& m,
                         const std::vector<float>& v, float eps, index_t N) {
        double lip = 0;
        for (index_t c = 0; c < N; ++c) lip = std::max(lip, std::abs(g[sz(c)] / std::sqrt(double(v[sz(c)]) + eps)));
        return apply(
            [&](double x, std::size_t i) {
                const std::size_t c = i % sz(N);
                return opfuse::reference::batch_norm(x, g[c], b[c], m[c], v[c], eps);
            },
            lip, [](double x, double y) { return 4 * u32 * (std::abs(x) + std::abs(y)) + 1e-30; });
    }
    Expected& add(const Matrix& r, index_t N) {
        return apply([&](double x, std::size_t i) { return x + r.at(index_t(i) / N, index_t(i) % N); }, 1.0,
                     [](double, double y) { return 2 * u32 * std::abs(y); });
    }
};

// Number of elements outside their bound (and a description of the worst one).
struct Comparison {
    std::size_t bad = 0;
    double worst = 0;
    std::string where;
};
Comparison compare(const Matrix& got, const Expected& e) {
    Comparison c;
    const index_t N = got.cols;
    for (index_t m = 0; m < got.rows; ++m)
        for (index_t n = 0; n < N; ++n) {
            const std::size_t i = sz(m * N + n);
            const double err = std::abs(double(got.at(m, n)) - e.val[i]);
            const double ratio = err / e.tol[i];
            if (!(ratio <= 1.0)) ++c.bad;  // NaN counts as bad
            if (!(ratio <= c.worst)) {
                c.worst = ratio;
                std::ostringstream os;
                os << "(" << m << ", " << n << "): got " << got.at(m, n) << " want " << e.val[i] << " tol " << e.tol[i];
                c.where = os.str();
            }
        }
    return c;
}

bool bitwise_equal(const Matrix& x, const Matrix& y) {
    return x.buf.size() == y.buf.size() && std::memcmp(x.buf.data(), y.buf.data(), x.buf.size() * sizeof(float)) == 0;
}

opfuse::thread_pool& pool2() {
    static opfuse::thread_pool p(2);
    return p;
}
opfuse::thread_pool& pool3() {
    static opfuse::thread_pool p(3);
    return p;
}

// Runs `layer` serially and on 2 and 3 threads (extra tensor operands forwarded), checks the results
// against `e`, the bitwise equality across thread counts and that the output padding was not written.
template <class Layer, class... Operands>
void run_and_check(const Layer& layer, const Matrix& a, Matrix& out, const Expected& e, Operands&&... ops) {
    std::vector<Matrix> results;
    for (int threads : {1, 2, 3}) {
        std::fill(out.buf.begin(), out.buf.end(), kSentinel);
        if (threads == 1)
            layer(a.cview(), out.view(), ops...);
        else if (threads == 2)
            layer(a.cview(), out.view(), ops..., pool2());
        else
            layer(a.cview(), out.view(), ops..., pool3());
        results.push_back(out);
    }
    const Comparison c = compare(results[0], e);
    INFO("worst error / tolerance " << c.worst << " at " << c.where);
    CHECK(c.bad == 0);
    CHECK(results[0].padding_untouched());
    CHECK(bitwise_equal(results[0], results[1]));
    CHECK(bitwise_equal(results[0], results[2]));
}

struct Params {
    std::vector<float> w, bias, gamma, beta, mean, var;
    Params(index_t N, index_t K, std::mt19937& g) {
        const float s = 1.f / std::sqrt(float(K));
        w = uniform(sz(N * K), -s, s, g);
        bias = uniform(sz(N), -0.5f, 0.5f, g);
        gamma = uniform(sz(N), 0.5f, 2.f, g);
        beta = uniform(sz(N), -0.5f, 0.5f, g);
        mean = uniform(sz(N), -0.3f, 0.3f, g);
        var = uniform(sz(N), 0.2f, 2.f, g);
    }
};

}  // namespace

using opfuse::Add;
using opfuse::BatchNorm;
using opfuse::BiasAdd;
using opfuse::fused;
using opfuse::GELU;
using opfuse::Linear;
using opfuse::Relu;
using opfuse::unfused;

TEST_CASE("Linear + BiasAdd + GELU(erf): shapes with tails, both weight layouts, 1/2/3 threads", "[linear]") {
    std::mt19937 g(1234);
    for (index_t M : {1, 2, 3, 7, 64, 65})
        for (index_t N : {1, 10, 17, 23, 64, 100})
            for (index_t K : {1, 3, 17, 64, 300}) {
                // Odd row pitches on some shapes: views that start rows unaligned.
                const index_t lda = (M + N + K) % 2 ? K + 3 : K, ldc = (M + K) % 2 ? N + 5 : N;
                CAPTURE(M, N, K, lda, ldc);
                const Params p(N, K, g);
                const Matrix a = input(M, K, lda, g);
                Matrix out(M, N, ldc);
                fused<Linear, BiasAdd, GELU> layer(Linear::params{K, N, p.w}, BiasAdd::params{p.bias},
                                                   GELU::params{GELU::Approximate::none});
                CHECK(layer.folded() == 1);
                run_and_check(layer, a, out, Expected::linear(a, p.w, N, p.bias).gelu(false));
            }
}

TEST_CASE("Linear layouts: narrow outputs keep [N][K] rows, wide ones register panels", "[linear]") {
    std::vector<float> w10(10 * 8, 0.f), w17(17 * 8, 0.f), w64(64 * 8, 0.f), w1000(1000 * 8, 0.f);
    CHECK(Linear(Linear::params{8, 10, w10}).panel_vectors() == 0);
    CHECK(Linear(Linear::params{8, 17, w17}).panel_vectors() == 0);
    CHECK(Linear(Linear::params{8, 64, w64}).panel_vectors() > 0);
    CHECK(Linear(Linear::params{8, 1000, w1000}).panel_vectors() > 0);
}

TEST_CASE("Linear GEMV with a big K: fixed K chunks, bitwise identical for 1/2/3 threads", "[linear][gemv]") {
    std::mt19937 g(99);
    const index_t K = 100000;
    for (index_t M : {1, 3})
        // Row layout (K split into chunks; with AVX-512 a single row of A reads 7, 5 + 5 and 7 + 8 + 8 weight
        // rows per tile) and register panels.
        for (index_t N : {7, 10, 23, 64}) {
            CAPTURE(M, N, K);
            const Params p(N, K, g);
            const Matrix a = input(M, K, K, g);
            Matrix out(M, N, N);
            fused<Linear, BiasAdd, Relu> layer(Linear::params{K, N, p.w}, BiasAdd::params{p.bias}, Relu::params{});
            run_and_check(layer, a, out, Expected::linear(a, p.w, N, p.bias).relu());
        }
}

TEST_CASE("Linear epilogue chains, fused and unfused", "[linear][chains]") {
    std::mt19937 g(7);
    struct Shape {
        index_t M, N, K;
    };
    for (const Shape s : {Shape{1, 100, 300}, Shape{3, 10, 64}, Shape{65, 64, 300}, Shape{13, 17, 129},
                          Shape{130, 96, 260}}) {
        const index_t M = s.M, N = s.N, K = s.K;
        CAPTURE(M, N, K);
        const Params p(N, K, g);
        const Matrix a = input(M, K, K, g);
        Matrix out(M, N, N);
        const Linear::params lp{K, N, p.w};
        const BatchNorm::params bn{p.gamma, p.beta, p.mean, p.var, 1e-5f};

        SECTION("BiasAdd + GELU(tanh)") {
            const auto e = Expected::linear(a, p.w, N, p.bias).gelu(true);
            const BiasAdd::params b{p.bias};
            const GELU::params ge{GELU::Approximate::tanh};
            run_and_check(fused<Linear, BiasAdd, GELU>(lp, b, ge), a, out, e);
            run_and_check(unfused<Linear, BiasAdd, GELU>(lp, b, ge), a, out, e);
        }
        SECTION("BiasAdd + BatchNorm + Relu, folded and not folded") {
            std::vector<double> scale(sz(N));
            for (index_t c = 0; c < N; ++c)
                scale[sz(c)] = p.gamma[sz(c)] / std::sqrt(double(p.var[sz(c)]) + 1e-5);
            const auto e_folded = Expected::linear(a, p.w, N, p.bias, scale)
                                      .batch_norm(p.gamma, p.beta, p.mean, p.var, 1e-5f, N)
                                      .relu();
            fused<Linear, BiasAdd, BatchNorm, Relu> folded(lp, BiasAdd::params{p.bias}, bn, Relu::params{});
            CHECK(folded.folded() == 2);
            run_and_check(folded, a, out, e_folded);
            Linear::params no_fold = lp;
            no_fold.fold_batchnorm = false;
            fused<Linear, BiasAdd, BatchNorm, Relu> epilogue(no_fold, BiasAdd::params{p.bias}, bn, Relu::params{});
            CHECK(epilogue.folded() == 0);
            const auto e = Expected::linear(a, p.w, N, p.bias).batch_norm(p.gamma, p.beta, p.mean, p.var, 1e-5f, N).relu();
            run_and_check(epilogue, a, out, e);
            run_and_check(unfused<Linear, BiasAdd, BatchNorm, Relu>(lp, BiasAdd::params{p.bias}, bn, Relu::params{}),
                          a, out, e);
        }
        SECTION("BiasAdd + Add(residual) + Relu") {
            Matrix r(M, N, N + 1, 0.f);
            std::uniform_real_distribution<float> d(-2.f, 2.f);
            for (index_t m = 0; m < M; ++m)
                for (index_t n = 0; n < N; ++n) r.at(m, n) = d(g);
            const auto e = Expected::linear(a, p.w, N, p.bias).add(r, N).relu();
            run_and_check(fused<Linear, BiasAdd, Add, Relu>(lp, BiasAdd::params{p.bias}, Add::params{}, Relu::params{}),
                          a, out, e, r.cview());
            run_and_check(unfused<Linear, BiasAdd, Add, Relu>(lp, BiasAdd::params{p.bias}, Add::params{}, Relu::params{}),
                          a, out, e, r.cview());
        }
        SECTION("Relu alone, no bias") {
            const auto e = Expected::linear(a, p.w, N, {}).relu();
            run_and_check(fused<Linear, Relu>(lp, Relu::params{}), a, out, e);
            run_and_check(unfused<Linear, Relu>(lp, Relu::params{}), a, out, e);
        }
        SECTION("bare Linear equals BiasAdd folded into the weights' bias") {
            const auto e = Expected::linear(a, p.w, N, p.bias);
            run_and_check(fused<Linear, BiasAdd>(lp, BiasAdd::params{p.bias}), a, out, e);
        }
    }
}

TEST_CASE("Linear + Add: the residual may be the output itself (fused, in place)", "[linear][chains]") {
    std::mt19937 g(5);
    for (index_t M : {1, 7, 65})
        for (index_t N : {10, 64})
            for (index_t K : {17, 300}) {
                CAPTURE(M, N, K);
                const Params p(N, K, g);
                const Matrix a = input(M, K, K, g);
                Matrix r(M, N, N, 0.f);
                std::uniform_real_distribution<float> d(-2.f, 2.f);
                for (auto& x : r.buf) x = d(g);
                const auto e = Expected::linear(a, p.w, N, p.bias).add(r, N);
                fused<Linear, BiasAdd, Add> layer(Linear::params{K, N, p.w}, BiasAdd::params{p.bias}, Add::params{});
                Matrix out = r;
                layer(a.cview(), out.view(), out.cview());
                const Comparison c = compare(out, e);
                INFO("worst error / tolerance " << c.worst << " at " << c.where);
                CHECK(c.bad == 0);
            }
}

TEST_CASE("Linear: fused and unfused agree at the model shapes' structure", "[linear]") {
    // A transformer MLP-like shape (multiple M blocks, K blocks and panels) and a batch-1 classifier.
    std::mt19937 g(11);
    struct Shape {
        index_t M, N, K;
    };
    for (const Shape s : {Shape{200, 320, 700}, Shape{1, 1000, 2048}, Shape{4, 250, 1000}}) {
        CAPTURE(s.M, s.N, s.K);
        const Params p(s.N, s.K, g);
        const Matrix a = input(s.M, s.K, s.K, g);
        Matrix f_out(s.M, s.N, s.N), u_out(s.M, s.N, s.N);
        const Linear::params lp{s.K, s.N, p.w};
        fused<Linear, BiasAdd, GELU> f(lp, BiasAdd::params{p.bias}, GELU::params{});
        unfused<Linear, BiasAdd, GELU> u(lp, BiasAdd::params{p.bias}, GELU::params{});
        const auto e = Expected::linear(a, p.w, s.N, p.bias).gelu(false);
        run_and_check(f, a, f_out, e);
        run_and_check(u, a, u_out, e);
    }
}

TEST_CASE("Linear rejects bad parameters and tensors before writing", "[linear][errors]") {
    std::vector<float> w(5 * 7, 0.5f), b(5, 0.f), x(3 * 7, 1.f);
    const auto in = opfuse::matrix<const float>(x.data(), 3, 7);

    using Catch::Matchers::Contains;
    CHECK_THROWS_AS(Linear(Linear::params{7, 5, {}}), std::invalid_argument);
    CHECK_THROWS_WITH(Linear(Linear::params{7, 5, {w.data(), 30}}), Contains("30") && Contains("5*7"));
    CHECK_THROWS_WITH(Linear(Linear::params{0, 5, w}), Contains("in_features=0"));
    CHECK_THROWS_WITH(Linear(Linear::params{7, -1, w}), Contains("out_features=-1"));
    std::vector<float> b4(4, 0.f);
    CHECK_THROWS_WITH((fused<Linear, BiasAdd>(Linear::params{7, 5, w}, BiasAdd::params{b4})), Contains("4"));

    fused<Linear, BiasAdd, Add> layer(Linear::params{7, 5, w}, BiasAdd::params{b}, Add::params{});
    std::vector<float> y(3 * 5, kSentinel), r(3 * 5, 0.f);
    const auto out = opfuse::matrix(y.data(), 3, 5);
    const auto res = opfuse::matrix<const float>(r.data(), 3, 5);
    auto untouched = [&] { return std::all_of(y.begin(), y.end(), [](float v) { return v == kSentinel; }); };

    // K mismatch
    std::vector<float> x8(3 * 8, 1.f);
    CHECK_THROWS_WITH(layer(opfuse::matrix<const float>(x8.data(), 3, 8), out, res),
                      Contains("[3 x 8]") && Contains("in_features=7"));
    // wrong output shape (rows, then columns)
    std::vector<float> y2(4 * 5, kSentinel);
    CHECK_THROWS_WITH(layer(in, opfuse::matrix(y2.data(), 4, 5), res), Contains("[4 x 5]") && Contains("[3 x 5]"));
    CHECK_THROWS_WITH(layer(in, opfuse::matrix(y2.data(), 3, 6), res), Contains("[3 x 6]"));
    // nulls
    CHECK_THROWS_WITH(layer(TensorView<const float, 2>{nullptr, {3, 7}, {7, 1}}, out, res), Contains("input"));
    CHECK_THROWS_WITH(layer(in, TensorView<float, 2>{nullptr, {3, 5}, {5, 1}}, res), Contains("output"));
    CHECK_THROWS_AS(layer(in, out, TensorView<const float, 2>{nullptr, {3, 5}, {5, 1}}), std::invalid_argument);
    // residual of the wrong shape
    CHECK_THROWS_AS(layer(in, out, opfuse::matrix<const float>(r.data(), 5, 3)), std::invalid_argument);
    // strided columns, overlapping output rows
    CHECK_THROWS_WITH(layer(TensorView<const float, 2>{x.data(), {3, 7}, {1, 3}}, out, res), Contains("column stride"));
    CHECK_THROWS_WITH(layer(in, TensorView<float, 2>{y.data(), {3, 5}, {2, 1}}, res), Contains("overlap"));
    CHECK(untouched());
    CHECK(std::all_of(y2.begin(), y2.end(), [](float v) { return v == kSentinel; }));

    layer(in, out, res);  // and a good call still works
    CHECK(y[0] == Approx(7 * 0.5f));
}
