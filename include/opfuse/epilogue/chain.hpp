// A chain of epilogues bound to the tensors of one call. Kernels call chain(x, site) on every accumulator
// vector before the single store; the chain applies each epilogue in order, loading the operand vector of
// a tensor-reading epilogue (Add, Mul) at the same site. The first `skip` epilogues are left out when the
// main op folded them into its weights at construction (BatchNorm folding).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>

#include "../kernel/vector_io.hpp"
#include "traits.hpp"

namespace opfuse {

template <class... Eps>
class chain {
public:
    static constexpr std::size_t tensor_count = (std::size_t{reads_tensor_v<Eps>} + ... + 0);
    static constexpr bool all_cheap = (is_cheap_v<Eps> && ...);
    // Every epilogue accepts a Site whose lanes run along the row (site.hpp).
    static constexpr bool pixel_lanes = (accepts_pixel_lanes_v<Eps> && ...);
    using operand_array = std::array<TensorView<const float, 4>, tensor_count>;

    chain(const std::tuple<Eps...>& eps, std::size_t skip, const operand_array& operands)
        : eps_(eps), skip_(skip), operands_(operands) {}

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> operator()(xsimd::batch<float, Arch> x, const Site& s) const {
        return step<0, 0>(x, s);
    }

    // Asks for the cache line that holds the operand values at `s` (its first lane) in every tensor the
    // chain reads, so that a kernel can start those loads before the reduction that precedes its epilogue.
    OPFUSE_ALWAYS_INLINE void prefetch_operands(const Site& s) const {
        for (const auto& t : operands_) __builtin_prefetch(t.data() + t.offset(s.n, s.channel, s.oh, s.ow), 0, 3);
    }

    // The tensors read by Add/Mul-like epilogues, in chain order.
    const operand_array& operands() const { return operands_; }

private:
    // Only the leading BiasAdd/BatchNorm can be folded, so later epilogues need no runtime check.
    static constexpr std::size_t max_skip = 2;

    template <std::size_t I, std::size_t K, class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> step(xsimd::batch<float, Arch> x, const Site& s) const {
        if constexpr (I == sizeof...(Eps)) {
            return x;
        } else {
            using E = std::tuple_element_t<I, std::tuple<Eps...>>;
            const E& e = std::get<I>(eps_);
            if constexpr (reads_tensor_v<E>) {
                x = e.apply(x, s, detail::load_at<Arch>(operands_[K], s));
                return step<I + 1, K + 1>(x, s);
            } else {
                if (I >= max_skip || I >= skip_) x = e.apply(x, s);
                return step<I + 1, K>(x, s);
            }
        }
    }

    const std::tuple<Eps...>& eps_;
    std::size_t skip_;
    operand_array operands_;
};

// The empty chain: a main op run on its own (the unfused composition).
using identity_chain = chain<>;

}  // namespace opfuse
