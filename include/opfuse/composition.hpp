// What fused<> and unfused<> share: the compile-time checks of a composition, the epilogue objects, the
// per-channel size checks, and the parsing and checking of a call's extra arguments (the tensors read by
// Add/Mul, in chain order, then optionally an executor).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "epilogue/chain.hpp"
#include "epilogue/traits.hpp"
#include "parallel/executor.hpp"

namespace opfuse::detail {

template <class Main, class... Eps>
class composition {
    static_assert(is_main_op_v<Main>,
                  "opfuse::fused<Main, Epilogues...>: the first type must be a main op (Conv2d, Linear). An "
                  "epilogue cannot come first and a chain without a main op is not a kernel: write "
                  "fused<Conv2d, Relu>, not fused<Relu, Conv2d>.");
    static_assert((!is_main_op_v<Eps> && ...),
                  "opfuse::fused<Main, Epilogues...>: only one main op per fused kernel; every type after the "
                  "first must be an epilogue. Run two layers as two fused<> objects.");
    static_assert((is_epilogue_v<Eps> && ...),
                  "opfuse::fused<Main, Epilogues...>: every type after the main op must be an epilogue: a type "
                  "with a nested `params` struct and an apply() member (see docs/epilogues.md).");

public:
    using main_type = Main;
    using chain_type = chain<Eps...>;
    using input_view = typename Main::input_view;
    using output_view = typename Main::output_view;
    static constexpr std::size_t tensor_operands = chain_type::tensor_count;

    const Main& main_op() const { return main_; }
    const std::tuple<Eps...>& epilogues() const { return eps_; }

protected:
    composition(std::tuple<Eps...> eps, Main main) : eps_(std::move(eps)), main_(std::move(main)) {
        check_channels();
    }

    void check_channels() const {
        std::apply([&](const auto&... e) { (check_one(e), ...); }, eps_);
    }

    // Splits (operand tensors..., [executor]) and calls body(operands, executor) after checking the
    // operands against the output shape.
    template <class Body, class... Args>
    void dispatch(const output_view& out, Body&& body, Args&&... args) const {
        constexpr std::size_t nargs = sizeof...(Args);
        if constexpr (last_is_executor<Args...>()) {
            static_assert(nargs - 1 == tensor_operands,
                          "opfuse::fused: wrong number of tensor arguments. Pass one tensor per Add/Mul "
                          "epilogue of the chain, in chain order, after the output (then the executor).");
            auto all = std::forward_as_tuple(std::forward<Args>(args)...);
            auto operands = operands_from(out, all, std::make_index_sequence<tensor_operands>{});
            body(operands, std::get<nargs - 1>(all));
        } else {
            static_assert(nargs == tensor_operands,
                          "opfuse::fused: wrong number of tensor arguments. Pass one tensor per Add/Mul "
                          "epilogue of the chain, in chain order, after the output (then the executor).");
            auto all = std::forward_as_tuple(std::forward<Args>(args)...);
            auto operands = operands_from(out, all, std::make_index_sequence<tensor_operands>{});
            serial_executor serial;
            body(operands, serial);
        }
    }

    std::tuple<Eps...> eps_;
    Main main_;

private:
    template <class... Args>
    static constexpr bool last_is_executor() {
        if constexpr (sizeof...(Args) == 0) {
            return false;
        } else {
            return is_executor_v<std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>>;
        }
    }

    template <class E>
    void check_one(const E& e) const {
        if constexpr (has_channels_v<E>) {
            require(e.channels() == main_.out_channels(), "epilogue has ", e.channels(),
                    " per-channel values but the main op has ", main_.out_channels(), " output channels");
        }
    }

    template <class Tuple, std::size_t... I>
    typename chain_type::operand_array operands_from(const output_view& out, const Tuple& all,
                                                     std::index_sequence<I...>) const {
        typename chain_type::operand_array ops{TensorView<const float, 4>(Main::as_tensor4(std::get<I>(all)))...};
        const auto out4 = Main::as_tensor4(out);
        for (std::size_t k = 0; k < ops.size(); ++k) {
            require(ops[k].data() != nullptr, "tensor operand #", k, " (Add/Mul) is null");
            if (!(ops[k].shape() == out4.shape())) fail("tensor operand #", k, " (Add/Mul) ", describe(ops[k]),
                    " must have the output's shape ", describe(out4));
        }
        return ops;
    }
};

}  // namespace opfuse::detail
