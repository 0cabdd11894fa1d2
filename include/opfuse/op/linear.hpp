// Linear (PyTorch nn.Linear / ONNX Gemm with transB): C[M][N] = A[M][K] . W^T (+ bias), W in [out][in].
// The main op validates its hyper-parameters, packs W once (folding a per-channel scale and shift when
// fused<> asks it to) into ONE of two layouts chosen from N, and runs the loop nest that suits it:
//   panels [N/NR][K][NR] (NR = 4, 2 or 1 vectors) -> linear_gemm.hpp: register-tile GEMM; with M <= 5
//       the same tiles read each panel exactly once, which is the batch-1 GEMV vectorized across N;
//   rows [N][K16] (K padded to 16)                 -> linear_gemv.hpp: dot products vectorized along K,
//       when padding N to whole panels would waste more than 1/8 of the work and of the weight bytes
//       (narrow heads: N = 10, 17, ...), with fixed-size K chunks for a huge-K GEMV.
// Only one copy of the weights is kept.
//
// Tensors are matrices: TensorView<const float, 2> input (M x K, any row stride, unit column stride) and
// TensorView<float, 2> output (M x N). Epilogues see the output as the rank-4 view (N=M, C=N, H=1, W=1)
// with strides (ld, 1, 0, 0), so BiasAdd, BatchNorm, GELU, Add (a residual matrix) ... work unchanged:
//   fused<Linear, BiasAdd, GELU> fc(Linear::params{1024, 4096, w}, BiasAdd::params{b}, GELU::params{});
//   fc(matrix(x, M, 1024), matrix(y, M, 4096), pool);
#pragma once

#include <algorithm>
#include <cstring>

#include "../core/aligned_buffer.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/span.hpp"
#include "../core/tensor.hpp"
#include "linear_gemm.hpp"
#include "linear_gemv.hpp"

namespace opfuse {

struct linear_params {
    index_t in_features = 0;     // K
    index_t out_features = 0;    // N
    span<const float> weights;   // PyTorch nn.Linear layout [out_features][in_features]
    bool fold_batchnorm = true;  // fold a leading BiasAdd/BatchNorm epilogue into weights and bias
};

namespace detail {

inline void validate(const linear_params& p) {
    require(p.in_features > 0 && p.out_features > 0, "Linear: features must be positive, got in_features=",
            p.in_features, " out_features=", p.out_features);
    require(p.weights.data() != nullptr, "Linear: weights are null");
    require(static_cast<index_t>(p.weights.size()) == p.in_features * p.out_features,
            "Linear: weights must hold out_features*in_features = ", p.out_features, "*", p.in_features, " = ",
            p.out_features * p.in_features, " values ([out][in]), got ", p.weights.size());
}

// Checks one call's tensors against the layer; throws before anything is written. The messages (which
// format the shapes) are only built on failure: this runs on every call.
inline void validate_call(const linear_params& p, const TensorView<const float, 2>& in,
                          const TensorView<float, 2>& out) {
    require(in.data() != nullptr, "Linear: input data is null");
    require(out.data() != nullptr, "Linear: output data is null");
    const index_t M = in.shape(0), K = in.shape(1);
    if (M <= 0) fail("Linear: input ", describe(in), " must have at least one row");
    if (K != p.in_features)
        fail("Linear: input ", describe(in), " has K=", K, " columns but the layer has in_features=", p.in_features);
    if (out.shape(0) != M || out.shape(1) != p.out_features)
        fail("Linear: output ", describe(out), " must have shape [", M, " x ", p.out_features, "] for input ",
             describe(in));
    if (in.stride(1) != 1) fail("Linear: input ", describe(in), " must have unit column stride, got ", in.stride(1));
    if (out.stride(1) != 1)
        fail("Linear: output ", describe(out), " must have unit column stride, got ", out.stride(1));
    if (M > 1 && in.stride(0) < 0) fail("Linear: input ", describe(in), " has a negative row stride ", in.stride(0));
    if (M > 1 && out.stride(0) < out.shape(1))
        fail("Linear: output ", describe(out), " rows overlap (row stride ", out.stride(0), " < N=", out.shape(1),
             ")");
}

}  // namespace detail

template <class Arch = default_arch>
class basic_linear {
public:
    static constexpr bool is_main_op = true;
    // A BiasAdd and/or BatchNorm right after the Linear may be folded into its weights (fused<> decides).
    static constexpr bool can_fold = true;
    using params = linear_params;
    using arch = Arch;
    using input_view = TensorView<const float, 2>;
    using output_view = TensorView<float, 2>;

    // The rank-4 view (N=M, C=N, H=1, W=1) of an output-shaped matrix (the output, or one read by Add/Mul).
    template <class T>
    static TensorView<T, 4> as_tensor4(const TensorView<T, 2>& v) {
        return {v.data(), {v.shape(0), v.shape(1), 1, 1}, {v.stride(0), v.stride(1), 0, 0}};
    }

    // `scale` and `shift` (one value per output feature, or empty) fold y = (x W^T) * scale + shift into
    // the packed weights and the bias.
    explicit basic_linear(const params& p, span<const float> scale = {}, span<const float> shift = {}) : p_(p) {
        detail::validate(p);
        p_.weights = {};  // the caller's buffer may go away after construction
        const index_t N = p.out_features, K = p.in_features;
        detail::require(scale.empty() || static_cast<index_t>(scale.size()) == N, "Linear: fold scale has ",
                        scale.size(), " values for out_features=", N);
        detail::require(shift.empty() || static_cast<index_t>(shift.size()) == N, "Linear: fold shift has ",
                        shift.size(), " values for out_features=", N);
        auto scale_of = [&](index_t o) { return scale.empty() ? 1.f : scale[static_cast<std::size_t>(o)]; };
        bias_ = shift.empty() ? aligned_buffer(static_cast<std::size_t>((N + 63) / 64 * 64))
                              : padded_copy(shift.data(), shift.size());
        nv_ = choose_nv(N);
        const float* w = p.weights.data();
        if (nv_ == 0) {
            // rows [N][ldw]
            ldw_ = (K + 15) / 16 * 16;
            weights_ = aligned_buffer(static_cast<std::size_t>(N * ldw_));
            for (index_t o = 0; o < N; ++o) {
                const float s = scale_of(o);
                float* dst = weights_.data() + o * ldw_;
                const float* src = w + o * K;
                for (index_t k = 0; k < K; ++k) dst[k] = src[k] * s;
            }
            return;
        }
        // panels [N/NR][K][NR]
        const index_t nr = nv_ * S;
        panels_ = (N + nr - 1) / nr;
        weights_ = aligned_buffer(static_cast<std::size_t>(panels_ * K * nr));
        for (index_t o = 0; o < N; ++o) {
            const float s = scale_of(o);
            float* dst = weights_.data() + (o / nr) * K * nr + o % nr;
            const float* src = w + o * K;
            for (index_t k = 0; k < K; ++k) dst[k * nr] = src[k] * s;
        }
    }

    const params& hyper_parameters() const { return p_; }
    index_t out_channels() const { return p_.out_features; }
    index_t in_features() const { return p_.in_features; }
    index_t out_features() const { return p_.out_features; }
    // Vectors per register panel (4, 2, 1), or 0 when the weights are kept as rows (narrow outputs).
    int panel_vectors() const { return nv_; }

    // Throws std::invalid_argument naming the shapes if `in`/`out` do not fit this layer.
    void check(const TensorView<const float, 2>& in, const TensorView<float, 2>& out) const {
        detail::validate_call(p_, in, out);
    }

    // out = chain(in . W^T + bias). The caller has checked the tensors (check()) and the chain's operands.
    // `out` must not overlap `in` (an Add operand may alias `out`).
    template <class Chain, class Exec>
    void run(const TensorView<const float, 2>& in, const TensorView<float, 2>& out, const Chain& chain,
             Exec& exec) const {
        if (nv_ == 0) {
            const detail::rows_plan plan{p_.in_features, p_.out_features, ldw_, weights_.data(), bias_.data()};
            detail::rows_linear<Arch>(plan, in, out, chain, exec);
            return;
        }
        const detail::gemm_plan plan{p_.in_features, p_.out_features, panels_, weights_.data(), bias_.data()};
        if (nv_ == 4)
            detail::gemm<Arch, 4>(plan, detail::matrix_rows{in, out}, chain, exec);
        else if (nv_ == 2)
            detail::gemm<Arch, 2>(plan, detail::matrix_rows{in, out}, chain, exec);
        else
            detail::gemm<Arch, 1>(plan, detail::matrix_rows{in, out}, chain, exec);
    }

private:
    static constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);

    // The widest panel whose zero padding past N is at most N/8; 0 (row layout) if none.
    static int choose_nv(index_t N) {
        for (int nv : {4, 2, 1}) {
            const index_t nr = nv * S;
            if (nv > 1 && N < (nv == 4 ? 4 * S : S + 1)) continue;
            const index_t padded = (N + nr - 1) / nr * nr;
            if (8 * (padded - N) <= N) return nv;
        }
        return 0;
    }

    params p_;
    aligned_buffer weights_, bias_;
    index_t panels_ = 0, ldw_ = 0;
    int nv_ = 0;
};

using Linear = basic_linear<>;

}  // namespace opfuse
