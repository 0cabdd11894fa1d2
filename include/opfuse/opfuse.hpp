// opfuse: fused CPU inference kernels. One include for everything:
//   opfuse::fused<Conv2d, BiasAdd, BatchNorm, Relu>  -- one SIMD loop nest, epilogues on the registers
//   opfuse::unfused<...>                             -- the same layer op by op (for comparison)
#pragma once

// GCC 12's own AVX-512 intrinsics (_mm512_max_ps & co. via _mm512_undefined_ps) raise a false
// -Wmaybe-uninitialized, or -Wuninitialized (_mm512_min_ps/_mm512_max_ps in Relu6, Clamp, HardSigmoid),
// once inlined into our flattened tile functions (GCC bug 105593). The warning is
// attributed to the template definitions, so silencing it here keeps users' -Wall -Werror builds clean
// without hiding anything in their own code.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define OPFUSE_POP_DIAGNOSTICS
#endif

#include "core/aligned_buffer.hpp"
#include "core/config.hpp"
#include "core/span.hpp"
#include "core/tensor.hpp"
#include "epilogue/add.hpp"
#include "epilogue/batch_norm.hpp"
#include "epilogue/bias_add.hpp"
#include "epilogue/clamp.hpp"
#include "epilogue/elu.hpp"
#include "epilogue/gelu.hpp"
#include "epilogue/hard_sigmoid.hpp"
#include "epilogue/hard_swish.hpp"
#include "epilogue/leaky_relu.hpp"
#include "epilogue/mish.hpp"
#include "epilogue/mul.hpp"
#include "epilogue/prelu.hpp"
#include "epilogue/relu.hpp"
#include "epilogue/scale.hpp"
#include "epilogue/sigmoid.hpp"
#include "epilogue/silu.hpp"
#include "epilogue/tanh.hpp"
#include "fused.hpp"
#include "op/conv2d.hpp"
#include "op/linear.hpp"
#include "parallel/executor.hpp"
#include "parallel/thread_pool.hpp"
#include "unfused.hpp"

#ifdef OPFUSE_POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#undef OPFUSE_POP_DIAGNOSTICS
#endif
