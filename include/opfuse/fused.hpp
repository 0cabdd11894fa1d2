// fused<Main, Epilogues...>: one kernel. The main op's micro-kernel runs the epilogue chain on its
// accumulator registers before the single store of the output; no intermediate tensor is written.
//
//   fused<Conv2d, BatchNorm, Add, Relu> block(conv_params, bn_params, {}, {});
//   block(input, output, residual);          // serial
//   block(input, output, residual, pool);    // on the caller's executor
//
// A leading BiasAdd and/or BatchNorm is folded into the conv's weights and bias at construction
// (W' = W*s, b' = (b - mean)*s + beta, s = gamma / sqrt(var + eps)) unless params.fold_batchnorm is false.
#pragma once

#include <vector>

#include "composition.hpp"
#include "epilogue/batch_norm.hpp"
#include "epilogue/bias_add.hpp"

namespace opfuse {

namespace detail {

// How many leading epilogues a main op can fold: [BiasAdd] [BatchNorm].
template <class... Eps>
struct foldable_prefix {
    static constexpr std::size_t value = 0;
};
template <class... Rest>
struct foldable_prefix<BatchNorm, Rest...> {
    static constexpr std::size_t value = 1;
};
template <class... Rest>
struct foldable_prefix<BiasAdd, Rest...> {
    static constexpr std::size_t value = 1;
};
template <class... Rest>
struct foldable_prefix<BiasAdd, BatchNorm, Rest...> {
    static constexpr std::size_t value = 2;
};

// The output channel count named by a main op's params: out_channels (Conv2d) or out_features (Linear).
template <class P, class = void>
struct names_out_features : std::false_type {};
template <class P>
struct names_out_features<P, std::void_t<decltype(std::declval<const P&>().out_features)>> : std::true_type {};
template <class P>
index_t params_out_channels(const P& p) {
    if constexpr (names_out_features<P>::value)
        return p.out_features;
    else
        return p.out_channels;
}

// The folded per-channel affine y = x * scale + shift of the first `count` epilogues.
template <class Tuple>
void folded_affine(const Tuple& eps, std::size_t count, index_t channels, std::vector<float>& scale,
                   std::vector<float>& shift) {
    scale.assign(static_cast<std::size_t>(channels), 1.f);
    shift.assign(static_cast<std::size_t>(channels), 0.f);
    auto fold = [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        for (index_t c = 0; c < channels; ++c) {
            auto& s = scale[static_cast<std::size_t>(c)];
            auto& t = shift[static_cast<std::size_t>(c)];
            if constexpr (std::is_same_v<E, BiasAdd>) {
                t += e.bias()[c];
            } else if constexpr (std::is_same_v<E, BatchNorm>) {
                s *= e.scale()[c];
                t = t * e.scale()[c] + e.shift()[c];
            }
        }
    };
    if (count >= 1) fold(std::get<0>(eps));
    if constexpr (std::tuple_size_v<Tuple> >= 2) {
        if (count >= 2) fold(std::get<1>(eps));
    }
}

}  // namespace detail

template <class Main, class... Eps>
class fused : public detail::composition<Main, Eps...> {
    using base = detail::composition<Main, Eps...>;

public:
    static constexpr std::size_t max_folded = Main::can_fold ? detail::foldable_prefix<Eps...>::value : 0;

    explicit fused(const typename Main::params& mp, const typename Eps::params&... ep)
        : fused(built{}, mp, std::tuple<Eps...>(Eps(ep)...)) {}

    // Epilogues folded into the main op's weights at construction (0, 1 or 2).
    std::size_t folded() const { return folded_; }

    template <class... Args>
    void operator()(const typename base::input_view& in, const typename base::output_view& out,
                    Args&&... args) const {
        this->main_.check(in, out);
        this->dispatch(
            out,
            [&](const auto& operands, auto& exec) {
                const typename base::chain_type ch(this->eps_, folded_, operands);
                this->main_.run(in, out, ch, exec);
            },
            std::forward<Args>(args)...);
    }

private:
    struct built {};
    fused(built, const typename Main::params& mp, const std::tuple<Eps...>& eps)
        : base(eps, make_main(mp, eps)), folded_(fold_count(mp)) {}

    static std::size_t fold_count(const typename Main::params& mp) {
        if constexpr (max_folded == 0) {
            (void)mp;
            return 0;
        } else {
            return mp.fold_batchnorm ? max_folded : 0;
        }
    }

    static Main make_main(const typename Main::params& mp, const std::tuple<Eps...>& eps) {
        if constexpr (max_folded == 0) {
            (void)eps;
            return Main(mp);
        } else {
            const std::size_t count = fold_count(mp);
            if (count == 0) return Main(mp);
            const index_t channels = detail::params_out_channels(mp);
            auto check = [&](const auto& e) {
                detail::require(e.channels() == channels, "folded epilogue has ", e.channels(),
                                " per-channel values but the main op has ", channels, " output channels");
            };
            check(std::get<0>(eps));
            if constexpr (max_folded >= 2) check(std::get<1>(eps));
            std::vector<float> scale, shift;
            detail::folded_affine(eps, count, channels, scale, shift);
            return Main(mp, scale, shift);
        }
    }

    std::size_t folded_;
};

}  // namespace opfuse
