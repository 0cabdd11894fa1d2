// BatchNorm folding: a leading BiasAdd and/or BatchNorm is folded into the conv weights and bias at
// construction (folded() says how many); the folded kernel must equal the unfolded chain
// (params.fold_batchnorm = false) and the reference within tolerance, for dense, grouped and depthwise
// layers, including negative BN scales (gamma < 0) and small variances.
#include "support.hpp"

using namespace test;
using opfuse::BatchNorm;
using opfuse::BiasAdd;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::Relu;
using opfuse::unfused;

static_assert(fused<Conv2d, BiasAdd, BatchNorm, Relu>::max_folded == 2);
static_assert(fused<Conv2d, BatchNorm, Relu>::max_folded == 1);
static_assert(fused<Conv2d, BiasAdd, Relu>::max_folded == 1);
static_assert(fused<Conv2d, Relu, BiasAdd>::max_folded == 0);
static_assert(fused<Conv2d, Relu, BatchNorm>::max_folded == 0);
static_assert(fused<Conv2d>::max_folded == 0);

namespace {

const ConvCase kShapes[] = {
    [] { ConvCase c; c.cin = 17, c.cout = 65, c.kh = c.kw = 3, c.pad = 1, c.h = 13, c.w = 11; return c; }(),
    [] { ConvCase c; c.cin = 64, c.cout = 17, c.n = 3, c.h = 5, c.w = 9; return c; }(),
    [] { ConvCase c; c.cin = c.cout = c.groups = 17, c.kh = c.kw = 3, c.pad = 1, c.h = 20, c.w = 7; return c; }(),
    [] { ConvCase c; c.cin = 34, c.cout = 14, c.groups = 2, c.kh = c.kw = 5, c.sh = c.sw = 2, c.pad = 2, c.h = 13, c.w = 11; return c; }(),
    [] { ConvCase c; c.cin = 16, c.cout = 32, c.groups = 16, c.kh = c.kw = 3, c.pad = 1, c.h = 5, c.w = 9; return c; }(),
};

// Compares two outputs element by element against the sum of their tolerances.
bool same_within(const Tensor& a, const Tensor& b, const std::vector<Val>& expected, std::string& why) {
    const auto x = a.get(), y = b.get();
    for (std::size_t i = 0; i < x.size(); ++i)
        if (!(std::fabs(double(x[i]) - y[i]) <= 2 * expected[i].err)) {
            why = "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs " + std::to_string(y[i]);
            return false;
        }
    return true;
}

template <class... Specs>
void check_fold(std::size_t expected_folded) {
    for (const ConvCase& cc : kShapes) {
        // a tiny variance (a large BN scale) and a zero gamma in the mix
        const Layer<Specs...> fixed(cc, 80, activation_weight_scale(cc), [](EpData& d) {
            d.var[1] = 1e-4f;
            d.gamma[2] = 0.f;
        });
        INFO(cc.str());
        for (Store s : {Store::NHWC, Store::NCHW}) {
            INFO(to_string(s));
            const auto folded = fixed.template run<fused<Conv2d, typename Specs::type...>>(s, s, s, true);
            const auto plain = fixed.template run<fused<Conv2d, typename Specs::type...>>(s, s, s, false);
            const auto op_by_op = fixed.template run<unfused<Conv2d, typename Specs::type...>>(s, s, s);
            CHECK(folded.folded == expected_folded);
            CHECK(plain.folded == 0);
            INFO("folded: " << folded.cmp.detail);
            CHECK(folded.cmp.ok);
            INFO("fold_batchnorm = false: " << plain.cmp.detail);
            CHECK(plain.cmp.ok);
            INFO("unfused: " << op_by_op.cmp.detail);
            CHECK(op_by_op.cmp.ok);
            std::string why;
            const bool same = same_within(folded.out, plain.out, fixed.expected, why);
            INFO("folded vs unfolded: " << why);
            CHECK(same);
        }
    }
}

}  // namespace

TEST_CASE("fold: Conv + BiasAdd + BatchNorm + Relu folds two epilogues", "[fold]") {
    check_fold<BiasAddSpec, BatchNormSpec, ReluSpec>(2);
}
TEST_CASE("fold: Conv + BatchNorm + Relu folds one", "[fold]") { check_fold<BatchNormSpec, ReluSpec>(1); }
// (nothing after an activation is folded: see the static_asserts above and test_chains.cpp)
