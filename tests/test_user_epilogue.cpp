// Epilogues written outside the library plug into fused<> and unfused<> through the documented
// protocol (params + apply, optional channels() and reads_tensor). Probe epilogues also check the Site
// contract: lane l of the vector is channel s.channel + l of pixel (s.n, s.oh, s.ow), and only the first
// s.lanes lanes are real.
#include <atomic>

#include "support.hpp"

using namespace test;
using opfuse::Conv2d;
using opfuse::fused;
using opfuse::unfused;

namespace {

struct Square {
    struct params {};
    explicit Square(const params&) {}
    template <class A>
    xsimd::batch<float, A> apply(xsimd::batch<float, A> x, const opfuse::Site&) const {
        return x * x;
    }
};
struct SquareSpec {
    using type = Square;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double) {
            const double y = x.v * x.v;
            return step(x, y, 2 * std::fabs(x.v) + x.err, u32 * y);
        };
    }
};

// A user per-channel epilogue (y = x - offset[c]) that declares channels(): fused<> checks its length.
struct SubOffset {
    struct params {
        std::vector<float> offset;
    };
    explicit SubOffset(const params& p) : v_(p.offset, "SubOffset") {}
    index_t channels() const { return v_.size(); }
    template <class A>
    xsimd::batch<float, A> apply(xsimd::batch<float, A> x, const opfuse::Site& s) const {
        return x - v_.at<A>(s);
    }
    opfuse::detail::channel_values v_;
};
struct SubOffsetSpec {
    using type = SubOffset;
    static type::params params(const EpData& d) { return {d.bias}; }
    static RefStep ref(const EpData& d) {
        return [b = d.bias](Val x, index_t c, double) {
            const double y = x.v - b[sz(c)];
            return step(x, y, 1, u32 * (std::fabs(x.v) + std::fabs(b[sz(c)])));
        };
    }
};

// A user tensor-reading epilogue: y = max(x, r).
struct MaxWith {
    struct params {};
    static constexpr bool reads_tensor = true;
    explicit MaxWith(const params&) {}
    template <class A>
    xsimd::batch<float, A> apply(xsimd::batch<float, A> x, const opfuse::Site&, xsimd::batch<float, A> r) const {
        return xsimd::max(x, r);
    }
};
struct MaxWithSpec {
    using type = MaxWith;
    static type::params params(const EpData&) { return {}; }
    static RefStep ref(const EpData&) {
        return [](Val x, index_t, double r) { return step(x, std::max(x.v, r), 1, 0); };
    }
};

// Replaces the value by where it is: lane l -> code(n, oh, ow, channel + l); lanes at or past s.lanes
// get NaN, so a kernel that stores more lanes than the Site declares shows up in the output. Site
// fields out of range are counted in `violations`.
struct SiteProbe {
    struct params {
        index_t N, C, OH, OW;
        std::atomic<int>* violations;
    };
    explicit SiteProbe(const params& p) : p_(p) {}
    template <class A>
    xsimd::batch<float, A> apply(xsimd::batch<float, A>, const opfuse::Site& s) const {
        using B = xsimd::batch<float, A>;
        constexpr int S = int(B::size);
        if (s.n < 0 || s.n >= p_.N || s.oh < 0 || s.oh >= p_.OH || s.ow < 0 || s.ow >= p_.OW || s.channel < 0 ||
            s.lanes < 1 || s.lanes > S || s.channel + s.lanes > p_.C)
            p_.violations->fetch_add(1);
        alignas(64) float v[S];
        for (int l = 0; l < S; ++l)
            v[l] = l < s.lanes ? code(s.n, s.channel + l, s.oh, s.ow) : std::numeric_limits<float>::quiet_NaN();
        return B::load_aligned(v);
    }
    // exact in float for the shapes used (< 2^24)
    static float code(index_t n, index_t c, index_t y, index_t x) { return float(((n * 128 + c) * 32 + y) * 32 + x); }
    params p_;
};

// The same probe for kernels that vectorize along the pixels (it declares pixel_lanes): with
// s.along_width, lane l is the pixel l places after (s.oh, s.ow) in row-major order, of channel s.channel.
struct PixelSiteProbe : SiteProbe {
    static constexpr bool pixel_lanes = true;
    using SiteProbe::SiteProbe;
    template <class A>
    xsimd::batch<float, A> apply(xsimd::batch<float, A> x, const opfuse::Site& s) const {
        if (!s.along_width) return SiteProbe::apply(x, s);
        using B = xsimd::batch<float, A>;
        constexpr int S = int(B::size);
        const index_t first = s.oh * p_.OW + s.ow;
        if (s.n < 0 || s.n >= p_.N || s.oh < 0 || s.oh >= p_.OH || s.ow < 0 || s.ow >= p_.OW || s.channel < 0 ||
            s.channel >= p_.C || s.lanes < 1 || s.lanes > S || first + s.lanes > p_.OH * p_.OW)
            p_.violations->fetch_add(1);
        alignas(64) float v[S];
        for (int l = 0; l < S; ++l)
            v[l] = l < s.lanes ? code(s.n, s.channel, (first + l) / p_.OW, (first + l) % p_.OW)
                               : std::numeric_limits<float>::quiet_NaN();
        return B::load_aligned(v);
    }
};

ConvCase shape(int i) {
    ConvCase c;
    switch (i) {
        case 0: c.cin = 7, c.cout = 17, c.kh = c.kw = 3, c.pad = 1, c.h = 13, c.w = 11; break;
        case 1: c.cin = 16, c.cout = 65, c.n = 2, c.h = 5, c.w = 9; break;
        default: c.cin = c.cout = c.groups = 65, c.kh = c.kw = 3, c.sh = c.sw = 2, c.pad = 1, c.h = 20, c.w = 7; break;
    }
    return c;
}

template <class... Specs>
void check_user_chain() {
    for (int s = 0; s < 3; ++s) {
        const ConvCase cc = shape(s);
        const Layer<Specs...> layer(cc, 120 + std::uint32_t(s), activation_weight_scale(cc));
        INFO(cc.str());
        for (auto io : {std::pair<Store, Store>{Store::NHWC, Store::NHWC}, {Store::NCHW, Store::NCHW},
                        {Store::NHWC, Store::NCHWPitch}}) {
            INFO(to_string(io.first) << " -> " << to_string(io.second));
            const auto f = layer.template run<fused<Conv2d, typename Specs::type...>>(io.first, io.second, io.second);
            INFO("fused: " << f.cmp.detail);
            CHECK(f.cmp.ok);
            const auto u = layer.template run<unfused<Conv2d, typename Specs::type...>>(io.first, io.second, io.second);
            INFO("unfused: " << u.cmp.detail);
            CHECK(u.cmp.ok);
        }
    }
}

}  // namespace

TEST_CASE("user epilogue: Square in fused<Conv2d, Square>", "[user]") {
    check_user_chain<SquareSpec>();
}

TEST_CASE("user epilogue: per-channel (channels()) and tensor-reading (reads_tensor) types", "[user]") {
    check_user_chain<SubOffsetSpec, MaxWithSpec>();
    // its channel count is checked like a built-in one's
    const std::vector<float> w(17 * 7 * 9, 0.f);
    const ConvCase cc = shape(0);
    CHECK_THROWS_AS((fused<Conv2d, SubOffset>(cc.params(w), SubOffset::params{std::vector<float>(16, 0.f)})),
                    std::invalid_argument);
}

TEST_CASE("user epilogue: the Site passed to apply() is exact", "[user][site]") {
    for (int s = 0; s < 3; ++s) {
        const ConvCase cc = shape(s);
        std::mt19937 g(7);
        const auto w = uniform(sz(cc.weight_count()), -1, 1, g);
        const auto x = activation_data(cc.n, cc.cin, cc.h, cc.w, g);
        const auto os = cc.out_shape();
        std::atomic<int> violations{0};
        const SiteProbe::params probe{os[0], os[1], os[2], os[3], &violations};
        for (Store si : {Store::NHWC, Store::NCHW, Store::NHWCSlice})
            for (Store so : {Store::NHWC, Store::NCHW, Store::NCHWPitch}) {
                INFO(cc.str() << " " << to_string(si) << " -> " << to_string(so));
                const Tensor in = input_tensor(si, cc.n, cc.cin, cc.h, cc.w, x);
                Tensor a(so, os[0], os[1], os[2], os[3], kSentinel), b = a;
                fused<Conv2d, SiteProbe>(cc.params(w), probe)(in.cview(), a.view);
                unfused<Conv2d, SiteProbe>(cc.params(w), probe)(in.cview(), b.view);
                for (const Tensor* t : {&a, &b}) {
                    std::size_t wrong = 0;
                    for (index_t n = 0; n < os[0]; ++n)
                        for (index_t c = 0; c < os[1]; ++c)
                            for (index_t y = 0; y < os[2]; ++y)
                                for (index_t xx = 0; xx < os[3]; ++xx)
                                    wrong += !(t->view(n, c, y, xx) == SiteProbe::code(n, c, y, xx));
                    CHECK(wrong == 0);
                    CHECK(t->touched_outside(kSentinel) == 0);
                }
                CHECK(violations.load() == 0);
            }
    }
}

TEST_CASE("user epilogue: the Site of the planar NCHW kernels is exact", "[user][site]") {
    // NCHW -> NCHW runs the kernels that put pixels along the lanes: 1x1 (45 pixels: one tail chunk;
    // 20 x 25: vectors that cross output rows; stride 2: the gathered panel), depthwise 3x3 and the first
    // layer (rows of 32 pixels).
    std::vector<ConvCase> cases(5);
    cases[0].cin = 16, cases[0].cout = 65, cases[0].n = 2, cases[0].h = 5, cases[0].w = 9;
    cases[1].cin = 8, cases[1].cout = 20, cases[1].h = 20, cases[1].w = 25;
    cases[2].cin = 8, cases[2].cout = 9, cases[2].sh = cases[2].sw = 2, cases[2].h = 21, cases[2].w = 27;
    cases[3].cin = cases[3].cout = cases[3].groups = 5, cases[3].kh = cases[3].kw = 3, cases[3].pad = 1, cases[3].h = 6,
    cases[3].w = 30;
    cases[4].cin = 3, cases[4].cout = 10, cases[4].kh = cases[4].kw = 3, cases[4].pad = 1, cases[4].h = 4, cases[4].w = 32;
    for (const ConvCase& cc : cases) {
        INFO(cc.str());
        std::mt19937 g(8);
        const auto w = uniform(sz(cc.weight_count()), -1, 1, g);
        const auto x = activation_data(cc.n, cc.cin, cc.h, cc.w, g);
        const auto os = cc.out_shape();
        std::atomic<int> violations{0};
        const SiteProbe::params probe{os[0], os[1], os[2], os[3], &violations};
        const Tensor in = input_tensor(Store::NCHW, cc.n, cc.cin, cc.h, cc.w, x);
        Tensor out(Store::NCHW, os[0], os[1], os[2], os[3], kSentinel);
        fused<Conv2d, PixelSiteProbe>(cc.params(w), probe)(in.cview(), out.view);
        std::size_t wrong = 0;
        for (index_t n = 0; n < os[0]; ++n)
            for (index_t c = 0; c < os[1]; ++c)
                for (index_t y = 0; y < os[2]; ++y)
                    for (index_t xx = 0; xx < os[3]; ++xx) wrong += !(out.view(n, c, y, xx) == SiteProbe::code(n, c, y, xx));
        CHECK(wrong == 0);
        CHECK(out.touched_outside(kSentinel) == 0);
        CHECK(violations.load() == 0);
    }
}
