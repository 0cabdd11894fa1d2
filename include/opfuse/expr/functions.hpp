// The user-facing vocabulary of expressions: leaves, arithmetic operators and activation functions.
// Each activation is the library's epilogue type of the same name (epilogue/*.hpp) applied to a
// sub-expression: relu(e) evaluates Relu::apply on the vector of e, so there is one definition of every
// activation for convs, gemms and expressions alike.
//
//   using namespace opfuse::expr;
//   auto x = tensor(x_view), r = tensor(r_view);
//   auto s = per_channel(scale), t = per_channel(shift);
//   assign(y_view, relu(x * s + t + r));
#pragma once

#include "../epilogue/clamp.hpp"
#include "../epilogue/elu.hpp"
#include "../epilogue/gelu.hpp"
#include "../epilogue/hard_sigmoid.hpp"
#include "../epilogue/hard_swish.hpp"
#include "../epilogue/leaky_relu.hpp"
#include "../epilogue/mish.hpp"
#include "../epilogue/relu.hpp"
#include "../epilogue/sigmoid.hpp"
#include "../epilogue/silu.hpp"
#include "../epilogue/tanh.hpp"
#include "nodes.hpp"

namespace opfuse::expr {

// ---- leaves ------------------------------------------------------------------------------------------

// A tensor operand: any rank-4 view (NHWC, NCHW, a channel slice, ...) with the output's logical shape.
inline tensor_leaf tensor(const TensorView<const float, 4>& view) { return tensor_leaf(view); }

// One value per channel (the output's C), broadcast over N, H and W. The values are read, not copied:
// they must outlive the expression.
inline channel_leaf per_channel(span<const float> values) { return channel_leaf(values); }

// ---- arithmetic --------------------------------------------------------------------------------------

namespace detail {
// At least one side is an expression, the other an expression or a number.
template <class L, class R>
inline constexpr bool operands_v = (is_expr_v<L> && (is_expr_v<R> || std::is_arithmetic_v<R>)) ||
                                   (is_expr_v<R> && std::is_arithmetic_v<L>);

template <class Op, class L, class R>
binary<Op, expr_t<L>, expr_t<R>> make_binary(const L& l, const R& r) {
    return {as_expr(l), as_expr(r)};
}
}  // namespace detail

template <class L, class R, class = std::enable_if_t<detail::operands_v<L, R>>>
auto operator+(const L& l, const R& r) {
    return detail::make_binary<ops::plus>(l, r);
}
template <class L, class R, class = std::enable_if_t<detail::operands_v<L, R>>>
auto operator-(const L& l, const R& r) {
    return detail::make_binary<ops::minus>(l, r);
}
template <class L, class R, class = std::enable_if_t<detail::operands_v<L, R>>>
auto operator*(const L& l, const R& r) {
    return detail::make_binary<ops::multiplies>(l, r);
}
template <class L, class R, class = std::enable_if_t<detail::operands_v<L, R>>>
auto operator/(const L& l, const R& r) {
    return detail::make_binary<ops::divides>(l, r);
}
// Lane-wise min / max of two expressions (or an expression and a number).
template <class L, class R, class = std::enable_if_t<detail::operands_v<L, R>>>
auto minimum(const L& l, const R& r) {
    return detail::make_binary<ops::minimum>(l, r);
}
template <class L, class R, class = std::enable_if_t<detail::operands_v<L, R>>>
auto maximum(const L& l, const R& r) {
    return detail::make_binary<ops::maximum>(l, r);
}
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto operator-(const A& a) {
    return unary<ops::negate, A>(ops::negate{}, a);
}

// ---- epilogues as functions --------------------------------------------------------------------------

// Any elementwise epilogue, including one of your own (see docs/epilogues_custom.md):
//   apply<Softplus>(x * s, Softplus::params{2.f})
template <class F, class A, class = std::enable_if_t<is_expr_v<A>>>
unary<F, A> apply(const A& a, const typename F::params& p = {}) {
    return unary<F, A>(F(p), a);
}

template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto relu(const A& a) { return apply<Relu>(a); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto relu6(const A& a) { return apply<Relu6>(a); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto clamp(const A& a, float lo, float hi) { return apply<Clamp>(a, Clamp::params{lo, hi}); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto leaky_relu(const A& a, float alpha = 0.01f) { return apply<LeakyRelu>(a, LeakyRelu::params{alpha}); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto elu(const A& a, float alpha = 1.f) { return apply<Elu>(a, Elu::params{alpha}); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto sigmoid(const A& a) { return apply<Sigmoid>(a); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto tanh(const A& a) { return apply<Tanh>(a); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto silu(const A& a) { return apply<SiLU>(a); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto gelu(const A& a, GELU::Approximate approximate = GELU::Approximate::none) {
    return apply<GELU>(a, GELU::params{approximate});
}
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto hard_sigmoid(const A& a, float alpha = 1.f / 6.f, float beta = 0.5f) {
    return apply<HardSigmoid>(a, HardSigmoid::params{alpha, beta});
}
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto hard_swish(const A& a) { return apply<HardSwish>(a); }
template <class A, class = std::enable_if_t<is_expr_v<A>>>
auto mish(const A& a) { return apply<Mish>(a); }

}  // namespace opfuse::expr
