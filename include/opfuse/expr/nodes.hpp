// The nodes of a standalone elementwise expression (expr.hpp has the overview). An expression is a small
// value type built by the operators and functions of functions.hpp; nothing is computed until assign().
//
//   leaves:   tensor(view)        a tensor shaped like the output (any strides)
//             per_channel(span)   one value per channel, broadcast over N, H, W
//             a float             a constant, broadcast everywhere
//   interior: binary<Op, L, R>    + - * / minimum maximum (+ and * are the Add and Mul epilogues;
//                                 a * b + c is evaluated as one fused multiply-add)
//             unary<F, A>         an epilogue applied to a sub-expression (relu(e) is unary<Relu, ...>)
//
// Every node knows, at compile time, how many tensor and per-channel leaves it holds, so that assign()
// can give each leaf a fixed slot (a pointer held in a register) in the loop that evaluates the tree.
#pragma once

#include <array>
#include <type_traits>
#include <utility>

#include "../core/config.hpp"
#include "../core/span.hpp"
#include "../core/tensor.hpp"
#include "../epilogue/add.hpp"
#include "../epilogue/mul.hpp"
#include "../epilogue/site.hpp"
#include "../epilogue/traits.hpp"

namespace opfuse::expr {

// The Site an expression gives the epilogues it applies: all lanes valid, no position. An elementwise
// pass has no single channel per vector (NCHW vectors run along W, flat NHWC vectors wrap around C), so
// only epilogues that do not read the Site's channel can be used (see unary below).
template <class Arch>
constexpr Site vector_site() {
    return Site{0, 0, 0, 0, int(xsimd::batch<float, Arch>::size)};
}

// Every expression node derives from expr_base; the operators only accept such types (and floats).
struct expr_base {};

template <class T>
inline constexpr bool is_expr_v = std::is_base_of_v<expr_base, std::decay_t<T>>;

// A tensor read by an expression: same logical shape (N, C, H, W) as the output, any strides.
struct tensor_leaf : expr_base {
    static constexpr int tensors = 1;
    static constexpr int channels = 0;
    TensorView<const float, 4> view;

    explicit tensor_leaf(const TensorView<const float, 4>& v) : view(v) {}

    template <class Arch, int T, int C, class Ctx>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> eval(const Ctx& ctx, index_t j, index_t c) const {
        (void)c;
        return ctx.template tensor<T>(j);
    }
    template <int T, int C, class Tv, class Cv>
    void collect(Tv& tv, Cv&) const {
        tv[T] = view;
    }
};

// One value per channel of the output, broadcast over N, H and W (a bias, a BatchNorm scale, ...).
struct channel_leaf : expr_base {
    static constexpr int tensors = 0;
    static constexpr int channels = 1;
    span<const float> values;

    explicit channel_leaf(span<const float> v) : values(v) {}

    template <class Arch, int T, int C, class Ctx>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> eval(const Ctx& ctx, index_t j, index_t c) const {
        (void)j;
        return ctx.template channel<C>(c);
    }
    template <int T, int C, class Tv, class Cv>
    void collect(Tv&, Cv& cv) const {
        cv[C] = values;
    }
};

// A constant.
struct scalar_leaf : expr_base {
    static constexpr int tensors = 0;
    static constexpr int channels = 0;
    float value;

    explicit scalar_leaf(float v) : value(v) {}

    template <class Arch, int T, int C, class Ctx>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> eval(const Ctx&, index_t, index_t) const {
        return xsimd::batch<float, Arch>(value);
    }
    template <int T, int C, class Tv, class Cv>
    void collect(Tv&, Cv&) const {}
};

// The arithmetic of binary nodes. Sums and products of two vectors are the Add and Mul epilogues, whose
// apply(x, site, operand) is exactly that; the rest has no epilogue of its own.
namespace ops {
struct plus {
    template <class B>
    OPFUSE_ALWAYS_INLINE static B apply(B a, B b, const Site& s) {
        return Add{}.apply(a, s, b);
    }
};
struct multiplies {
    template <class B>
    OPFUSE_ALWAYS_INLINE static B apply(B a, B b, const Site& s) {
        return Mul{}.apply(a, s, b);
    }
};
struct minus {
    template <class B>
    OPFUSE_ALWAYS_INLINE static B apply(B a, B b, const Site&) {
        return a - b;
    }
};
struct divides {
    template <class B>
    OPFUSE_ALWAYS_INLINE static B apply(B a, B b, const Site&) {
        return a / b;
    }
};
struct minimum {
    template <class B>
    OPFUSE_ALWAYS_INLINE static B apply(B a, B b, const Site&) {
        return xsimd::min(a, b);
    }
};
struct maximum {
    template <class B>
    OPFUSE_ALWAYS_INLINE static B apply(B a, B b, const Site&) {
        return xsimd::max(a, b);
    }
};
// Unary minus, written as a (parameterless) epilogue so that it is a unary node like the activations.
struct negate {
    struct params {};
    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site&) const {
        return -x;
    }
};
}  // namespace ops

template <class Op, class L, class R>
struct binary;

template <class T>
struct is_product : std::false_type {};
template <class L, class R>
struct is_product<binary<ops::multiplies, L, R>> : std::true_type {};
template <class T>
inline constexpr bool is_product_v = is_product<T>::value;

template <class Op, class L, class R>
struct binary : expr_base {
    using left_type = L;
    using right_type = R;
    static constexpr int tensors = L::tensors + R::tensors;
    static constexpr int channels = L::channels + R::channels;
    L left;
    R right;

    binary(L l, R r) : left(std::move(l)), right(std::move(r)) {}

    template <class Arch, int T, int C, class Ctx>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> eval(const Ctx& ctx, index_t j, index_t c) const {
        if constexpr (std::is_same_v<Op, ops::plus> && is_product_v<L>) {
            // a * b + c: one fused multiply-add (one rounding, whatever the compiler's contraction rules)
            const auto a = left.left.template eval<Arch, T, C>(ctx, j, c);
            const auto b = left.right.template eval<Arch, T + L::left_type::tensors,
                                                    C + L::left_type::channels>(ctx, j, c);
            const auto d = right.template eval<Arch, T + L::tensors, C + L::channels>(ctx, j, c);
            return xsimd::fma(a, b, d);
        } else {
            const auto a = left.template eval<Arch, T, C>(ctx, j, c);
            const auto b = right.template eval<Arch, T + L::tensors, C + L::channels>(ctx, j, c);
            return Op::apply(a, b, vector_site<Arch>());
        }
    }
    template <int T, int C, class Tv, class Cv>
    void collect(Tv& tv, Cv& cv) const {
        left.template collect<T, C>(tv, cv);
        right.template collect<T + L::tensors, C + L::channels>(tv, cv);
    }
};

// An epilogue F applied to a sub-expression. Only epilogues whose result depends on the vector alone can
// appear here: a per-channel epilogue (one with channels(), e.g. BiasAdd, PRelu) indexes its values by
// the Site's channel, which an elementwise pass over an NCHW or flattened NHWC tensor does not have;
// write those with per_channel() leaves instead (x * per_channel(s) + per_channel(t)).
template <class F, class A>
struct unary : expr_base {
    static_assert(!has_channels_v<F>,
                  "opfuse::expr: a per-channel epilogue (one with channels(), such as BiasAdd, Scale, BatchNorm, "
                  "PRelu) cannot be applied to an expression; write it with per_channel() leaves, e.g. "
                  "x * per_channel(scale) + per_channel(shift).");
    static_assert(!reads_tensor_v<F>,
                  "opfuse::expr: an epilogue that reads a tensor (Add, Mul) is written with + and * on a "
                  "tensor() leaf in an expression.");
    static constexpr int tensors = A::tensors;
    static constexpr int channels = A::channels;
    F fn;
    A arg;

    unary(F f, A a) : fn(std::move(f)), arg(std::move(a)) {}

    template <class Arch, int T, int C, class Ctx>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> eval(const Ctx& ctx, index_t j, index_t c) const {
        return fn.apply(arg.template eval<Arch, T, C>(ctx, j, c), vector_site<Arch>());
    }
    template <int T, int C, class Tv, class Cv>
    void collect(Tv& tv, Cv& cv) const {
        arg.template collect<T, C>(tv, cv);
    }
};

namespace detail {

// A float becomes a scalar leaf; an expression stays what it is.
template <class T>
auto as_expr(const T& t) {
    if constexpr (is_expr_v<T>) {
        return t;
    } else {
        static_assert(std::is_arithmetic_v<T>, "opfuse::expr: an operand must be an expression or a number");
        return scalar_leaf(static_cast<float>(t));
    }
}
template <class T>
using expr_t = decltype(as_expr(std::declval<const T&>()));

// The leaves of an expression, in slot order: tensors first to last, per-channel values first to last.
template <class E>
struct leaves {
    std::array<TensorView<const float, 4>, E::tensors> tensors{};
    std::array<span<const float>, E::channels> channels{};
    explicit leaves(const E& e) { e.template collect<0, 0>(tensors, channels); }
};

}  // namespace detail
}  // namespace opfuse::expr
