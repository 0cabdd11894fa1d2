// The epilogue protocol. An epilogue is a small type:
//
//   struct MyEpilogue {
//       struct params { ... };                        // runtime parameters, given to fused<>'s constructor
//       explicit MyEpilogue(const params&);           // copies what it needs (per-channel data padded)
//       template <class Arch>
//       xsimd::batch<float, Arch> apply(xsimd::batch<float, Arch> x, const Site& s) const;
//
//       // optional: per-channel epilogues say how many channels they hold; fused<> checks it.
//       index_t channels() const;
//       // optional: reads a tensor shaped like the output, passed at call time; apply() then takes
//       // the operand vector loaded at the same site as a third argument.
//       static constexpr bool reads_tensor = true;
//       // optional: apply() is right for any Site, also one whose lanes run along the row (see site.hpp):
//       // it uses no s.channel + lane arithmetic of its own (per-channel data through
//       // detail::channel_values::at, tensors through the chain, or nothing).
//       static constexpr bool pixel_lanes = true;
//   };
//
// Main ops (Conv2d, Linear) instead declare `static constexpr bool is_main_op = true;`.
#pragma once

#include <type_traits>

#include "../core/tensor.hpp"

namespace opfuse {

template <class T, class = void>
struct is_main_op : std::false_type {};
template <class T>
struct is_main_op<T, std::void_t<decltype(T::is_main_op)>> : std::bool_constant<T::is_main_op> {};
template <class T>
inline constexpr bool is_main_op_v = is_main_op<T>::value;

template <class T, class = void>
struct has_params : std::false_type {};
template <class T>
struct has_params<T, std::void_t<typename T::params>> : std::true_type {};

template <class T>
inline constexpr bool is_epilogue_v = has_params<T>::value && !is_main_op_v<T>;

template <class T, class = void>
struct reads_tensor : std::false_type {};
template <class T>
struct reads_tensor<T, std::void_t<decltype(T::reads_tensor)>> : std::bool_constant<T::reads_tensor> {};
template <class T>
inline constexpr bool reads_tensor_v = reads_tensor<T>::value;

// Cheap epilogues (a few arithmetic instructions, no transcendental) declare `static constexpr bool cheap
// = true;` and run on the accumulator registers, unrolled over the whole tile. Others (exp, erf, tanh,
// and user epilogues unless they opt in) run in a loop over the tile staged in L1, which keeps the
// kernels' code size and compile time from multiplying by the tile size.
template <class T, class = void>
struct is_cheap : std::false_type {};
template <class T>
struct is_cheap<T, std::void_t<decltype(T::cheap)>> : std::bool_constant<T::cheap> {};
template <class T>
inline constexpr bool is_cheap_v = is_cheap<T>::value;

template <class T, class = void>
struct accepts_pixel_lanes : std::false_type {};
template <class T>
struct accepts_pixel_lanes<T, std::void_t<decltype(T::pixel_lanes)>> : std::bool_constant<T::pixel_lanes> {};
template <class T>
inline constexpr bool accepts_pixel_lanes_v = accepts_pixel_lanes<T>::value;

template <class T, class = void>
struct has_channels : std::false_type {};
template <class T>
struct has_channels<T, std::void_t<decltype(std::declval<const T&>().channels())>> : std::true_type {};
template <class T>
inline constexpr bool has_channels_v = has_channels<T>::value;

}  // namespace opfuse
