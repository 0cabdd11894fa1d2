// opfuse::expr -- standalone elementwise expressions, evaluated in one pass over the tensors:
//
//   #include <opfuse/expr/expr.hpp>
//   using namespace opfuse::expr;
//   auto x = tensor(x_view), r = tensor(r_view);          // views shaped like the output (any layout)
//   auto s = per_channel(scale), t = per_channel(shift);  // one value per channel
//   assign(y_view, relu(x * s + t + r));                  // y = relu(x * s[c] + t[c] + r), one pass
//   assign(y_view, relu(x * s + t + r), pool);            // on the caller's executor
//
// The activations are the library's epilogue types (Relu, Sigmoid, GELU, ...; apply<MyEpilogue>(e, p)
// for any elementwise epilogue), so an expression computes exactly what fused<Conv2d, ...> computes.
// See docs/expressions.md.
#pragma once

// GCC 12 reports false -Wmaybe-uninitialized / -Wuninitialized warnings inside AVX-512 intrinsics that
// take _mm512_undefined_ps() as their pass-through operand (xsimd's exp/erf/tanh and max; GCC bug 105593,
// fixed in GCC 13), which -Werror turns into errors. When this header is the first to bring in xsimd,
// xsimd is included with them off; assign.hpp also silences them where epilogues are inlined into its
// loops. (Doing the same around the include in core/config.hpp would cover every opfuse header.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
#endif

#include "assign.hpp"
#include "functions.hpp"
#include "nodes.hpp"
