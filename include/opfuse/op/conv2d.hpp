// Conv2d, the main op: validates its hyper-parameters, packs the OIHW weights once (folding a per-channel
// scale and shift when fused<> asks it to) and runs the loop nest that suits the layer:
//   depthwise (1 input and 1 output channel per group)       -> conv2d_depthwise.hpp
//     3x3 stride 1 "same" on dense planar tensors (AVX-512)  -> conv2d_depthwise_flat.hpp
//     3x3 stride 1 on planar tensors (AVX2)                   -> conv2d_depthwise_rows3x3.hpp
//     on planar (NCHW) tensors, stride 1 along the rows       -> conv2d_depthwise_planar.hpp
//   1x1 unpadded, channel-contiguous (NHWC) tensors          -> the GEMM of linear_gemm.hpp
//   1x1 unpadded, planar (NCHW) tensors                      -> conv2d_pointwise_planar.hpp
//   short reductions (the first layer) on planar tensors     -> conv2d_planar_rows.hpp
//   3x3 stride 1 "same" on dense planar tensors (AVX-512)    -> conv2d_dense_flat.hpp
//   small NCHW images with weights beyond L2 (512 @7)         -> conv2d_image_band.hpp
//   everything else (dense, grouped, NCHW, ...)              -> conv2d_direct.hpp
#pragma once

#include <algorithm>

#include "../core/aligned_buffer.hpp"
#include "../core/config.hpp"
#include "../kernel/gemm_tile.hpp"
#include "conv2d_depthwise.hpp"
#include "conv2d_depthwise_flat.hpp"
#include "conv2d_dense_flat.hpp"
#include "conv2d_depthwise_planar.hpp"
#include "conv2d_depthwise_rows3x3.hpp"
#include "conv2d_direct.hpp"
#include "conv2d_image_band.hpp"
#include "conv2d_planar_rows.hpp"
#include "conv2d_pointwise_planar.hpp"
#include "conv2d_geometry.hpp"
#include "linear_gemm.hpp"

namespace opfuse {

template <class Arch = default_arch>
class basic_conv2d {
public:
    static constexpr bool is_main_op = true;
    // A BiasAdd and/or BatchNorm right after the conv may be folded into its weights (fused<> decides).
    static constexpr bool can_fold = true;
    using params = conv2d_params;
    using arch = Arch;
    using input_view = TensorView<const float, 4>;
    using output_view = TensorView<float, 4>;

    // The rank-4 (N, C, H, W) view of an output-shaped tensor (the output, or one read by Add/Mul).
    template <class T>
    static TensorView<T, 4> as_tensor4(const TensorView<T, 4>& v) {
        return v;
    }

    // `scale` and `shift` (one value per output channel, or empty) fold y = conv(x) * scale + shift
    // into the packed weights and the bias.
    explicit basic_conv2d(const params& p, span<const float> scale = {}, span<const float> shift = {}) : p_(p) {
        detail::validate(p);
        p_.weights = {};  // the caller's buffer may go away after construction
        const index_t K = p.out_channels;
        detail::require(scale.empty() || static_cast<index_t>(scale.size()) == K, "Conv2d: fold scale has ",
                        scale.size(), " values for out_channels=", K);
        auto scale_of = [&](index_t o) { return scale.empty() ? 1.f : scale[static_cast<std::size_t>(o)]; };
        bias_ = shift.empty() ? aligned_buffer(static_cast<std::size_t>(K + 64))
                              : padded_copy(shift.data(), shift.size());
        const index_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
        depthwise_ = cin_g == 1 && cout_g == 1;
        const Padding& q = p.padding;
        pointwise_ = p.kernel.h == 1 && p.kernel.w == 1 && p.groups == 1 && !depthwise_ &&
                     q.top == 0 && q.left == 0 && q.bottom == 0 && q.right == 0;
        // The widest register tile that the group's output channels fill (measured: 6x4 beats 12x2 even
        // when its weight panel overflows L2, e.g. 512->512 @7x7).
        // With 16 registers (AVX2, SSE) 6x2 leaves more room than 3x4, except for short reductions (the band
        // path's kw * cin < 32, e.g. the first layer's 3x3x3) on AVX2: 3x4 broadcasts half as many inputs
        // per FMA, and measured 5-13 % faster there on Zen 1, while the 1x1 layers lost 2-6 % (dense 3x3: mixed,
        // within the noise).
        constexpr bool wide = detail::tile_shape<Arch>::wide_register_file;
        const bool four = wide || (detail::tile_shape<Arch>::four_vector_tiles &&
                                   detail::short_reduction(p.kernel.w, cin_g));
        nv_ = four && cout_g >= 4 * S ? 4 : cout_g > S ? 2 : 1;
        const index_t nr = nv_ * S;
        const index_t taps = p.kernel.h * p.kernel.w;
        const float* w = p.weights.data();
        zeros_ = aligned_buffer(static_cast<std::size_t>(std::max<index_t>(S, p.kernel.w * cin_g) + S));

        if (depthwise_) {
            // [channel vector][kh][kw][S]
            const index_t vectors = (K + S - 1) / S;
            weights_ = aligned_buffer(static_cast<std::size_t>(vectors * taps * S));
            // and, for channel-strided tensors, the direct kernel's layout: one group per channel, lane 0.
            direct_depthwise_ = aligned_buffer(static_cast<std::size_t>(K * taps * S));
            for (index_t c = 0; c < K; ++c)
                for (index_t t = 0; t < taps; ++t) {
                    const float v = w[c * taps + t] * scale_of(c);
                    weights_[static_cast<std::size_t>(((c / S) * taps + t) * S + c % S)] = v;
                    direct_depthwise_[static_cast<std::size_t>((c * taps + t) * S)] = v;
                }
            return;
        }
        // [group][block][kh][kw][cin_g][NR]
        blocks_ = (cout_g + nr - 1) / nr;
        weights_ = aligned_buffer(static_cast<std::size_t>(p.groups * blocks_ * taps * cin_g * nr));
        for (index_t g = 0; g < p.groups; ++g)
            for (index_t oc = 0; oc < cout_g; ++oc) {
                const index_t o = g * cout_g + oc, blk = oc / nr, lane = oc % nr;
                for (index_t ic = 0; ic < cin_g; ++ic)
                    for (index_t t = 0; t < taps; ++t) {
                        const float v = w[(o * cin_g + ic) * taps + t] * scale_of(o);
                        const index_t panel = (g * blocks_ + blk) * taps;
                        weights_[static_cast<std::size_t>(((panel + t) * cin_g + ic) * nr + lane)] = v;
                    }
            }
    }

    const params& hyper_parameters() const { return p_; }
    index_t out_channels() const { return p_.out_channels; }
    bool is_depthwise() const { return depthwise_; }

    std::array<index_t, 4> output_shape(const TensorView<const float, 4>& in) const {
        return conv2d_output_shape(p_, in.n(), in.h(), in.w());
    }

    // Throws std::invalid_argument naming the shapes if `in`/`out` do not fit this layer.
    void check(const TensorView<const float, 4>& in, const TensorView<float, 4>& out) const {
        detail::validate_call(p_, in, out);
    }

    // out = chain(conv(in) + bias). The caller has checked the tensors (check()) and the chain's operands.
    template <class Chain, class Exec>
    void run(const TensorView<const float, 4>& in, const TensorView<float, 4>& out, const Chain& chain,
             Exec& exec) const {
        const Padding& q = p_.padding;
        if (depthwise_) {
            const detail::depthwise_plan plan{p_.out_channels, p_.kernel.h, p_.kernel.w, p_.stride.h, p_.stride.w,
                                              q.top,           q.left,      p_.dilation.h, p_.dilation.w,
                                              weights_.data(), bias_.data(), zeros_.data()};
            // Planar (NCHW) tensors: vectorized along the rows when the chain allows it (see site.hpp).
            if constexpr (Chain::pixel_lanes) {
#if XSIMD_WITH_AVX512F
                if constexpr (detail::has_masked_moves<Arch>) {
                    if (detail::depthwise_flat_supports<Arch>(plan, in, out, chain))
                        return detail::depthwise_flat<Arch>(plan, in, out, chain, exec);
                }
#endif
#if XSIMD_WITH_AVX2
                if constexpr (detail::is_avx2_family<Arch>) {
                    if (detail::depthwise_rows3x3_supports<Arch>(plan, in, out))
                        return detail::depthwise_rows3x3_planes<Arch>(plan, in, out, chain, exec);
                }
#endif
                if (in.stride(1) != 1 && detail::depthwise_planar_supports<Arch>(plan, in, out))
                    return detail::depthwise_planar<Arch>(plan, in, out, chain, exec);
            }
            if (detail::depthwise_supports<Arch>(plan, in)) return detail::depthwise_conv<Arch>(plan, in, out, chain, exec);
            // A channel-strided input too wide for the stack band: one group per channel.
            run_direct<1>(in, out, chain, exec, direct_depthwise_.data());
            return;
        }
        if constexpr (detail::tile_shape<Arch>::four_vector_tiles) {
            if (nv_ == 4) return run_dense<4>(in, out, chain, exec);
        }
        if (nv_ == 2)
            run_dense<2>(in, out, chain, exec);
        else
            run_dense<1>(in, out, chain, exec);
    }

private:
    static constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);

    // An unpadded 1x1 convolution over channel-contiguous tensors is the GEMM [pixels][Cin] x [Cin][Cout],
    // and the packed weights ([block][Cin][NR] for one tap) are already the GEMM's panels, so it runs
    // Linear's kernel with the pixels as rows (pixel_rows). Measured side by side (Zen 4, 1 thread):
    // 64->256 @56 1.05 vs 1.30 ms on the direct tiles. The GEMM's tasks sweep one weight panel over a
    // block of pixels held in L2, and it prefetches the next panel and each tile's output lines.
    template <int NV, class Chain, class Exec>
    void run_dense(const TensorView<const float, 4>& in, const TensorView<float, 4>& out, const Chain& chain,
                   Exec& exec) const {
        if constexpr (Chain::pixel_lanes) {
            // Planar tensors: vectorized along the pixels, nothing transposed (conv2d_pointwise_planar.hpp).
            const detail::pointwise_planar_plan plan{p_.in_channels, p_.out_channels, NV * S, p_.stride.h,
                                                     p_.stride.w,    weights_.data(),  bias_.data()};
            if (pointwise_ && detail::pointwise_planar_supports<Arch>(plan, in, out, chain))
                return detail::pointwise_planar<Arch>(plan, in, out, chain, exec);
            const Padding& q = p_.padding;
            const detail::planar_rows_plan rows{p_.in_channels, p_.out_channels, p_.kernel.h, p_.kernel.w,
                                                p_.stride.h,    q.top,           q.left,      p_.dilation.h,
                                                p_.dilation.w,  NV * S,          weights_.data(), bias_.data(),
                                                detail::can_stream<Arch>(out.data(), out.stride(1), out.stride(2),
                                                                         out.stride(0), out.size() * sizeof(float))};
            if (!pointwise_ && p_.groups == 1 && p_.stride.w == 1 && detail::planar_rows_supports<Arch>(rows, in, out))
                return detail::planar_rows<Arch>(rows, in, out, chain, exec);
#if XSIMD_WITH_AVX512F
            if constexpr (detail::has_masked_moves<Arch>) {
                const detail::dense_flat_plan flat{p_.in_channels, p_.out_channels, p_.kernel.h, p_.kernel.w,
                                                   p_.stride.h,    p_.stride.w,     q.top,       q.left,
                                                   p_.dilation.h,  p_.dilation.w,   p_.groups,   NV * S,
                                                   weights_.data(), bias_.data(),  rows.stream};
                if (detail::dense_flat_supports<Arch>(flat, in, out, chain))
                    return detail::dense_flat<Arch>(flat, in, out, chain, exec);
            }
#endif
        }
        if (!pointwise_ || in.stride(1) != 1 || out.stride(1) != 1)
            return run_direct<NV>(in, out, chain, exec, weights_.data());
        const detail::gemm_plan plan{p_.in_channels, p_.out_channels, blocks_, weights_.data(), bias_.data(),
                                     detail::can_stream<Arch>(out.data(), out.stride(3), out.stride(2),
                                                              out.stride(0), out.size() * sizeof(float))};
        auto packed = [](const auto& t, index_t pixel) {
            return t.stride(3) == pixel && t.stride(2) == t.w() * pixel && (t.n() == 1 || t.stride(0) == t.h() * t.stride(2));
        };
        if (p_.stride.h == 1 && p_.stride.w == 1 && packed(in, in.c()) && packed(out, out.c()))
            detail::gemm<Arch, NV>(plan, detail::pixel_rows<true>{in, out, 1, 1}, chain, exec);
        else
            detail::gemm<Arch, NV>(plan, detail::pixel_rows<false>{in, out, p_.stride.h, p_.stride.w}, chain, exec);
    }

    template <int NV, class Chain, class Exec>
    void run_direct(const TensorView<const float, 4>& in, const TensorView<float, 4>& out, const Chain& chain,
                    Exec& exec, const float* packed) const {
        const Padding& q = p_.padding;
        const detail::direct_plan plan{p_.groups,
                                       p_.in_channels / p_.groups,
                                       p_.out_channels / p_.groups,
                                       p_.in_channels / p_.groups,
                                       p_.kernel.h,
                                       p_.kernel.w,
                                       p_.stride.h,
                                       p_.stride.w,
                                       q.top,
                                       q.left,
                                       p_.dilation.h,
                                       p_.dilation.w,
                                       blocks_ ? blocks_ : 1,
                                       packed,
                                       bias_.data(),
                                       zeros_.data(),
                                       out.stride(1) == 1 && detail::can_stream<Arch>(out.data(), out.stride(3),
                                                                                      out.stride(2), out.stride(0),
                                                                                      out.size() * sizeof(float))};
        if (detail::image_band_supports<Arch, NV>(plan, in, out, exec.num_threads()))
            return detail::image_band_conv<Arch, NV>(plan, in, out, chain, exec);
        detail::direct_conv<Arch, NV>(plan, in, out, chain, exec);
    }

    params p_;
    aligned_buffer weights_, bias_, zeros_, direct_depthwise_;
    index_t blocks_ = 0;
    int nv_ = 1;
    bool depthwise_ = false;
    bool pointwise_ = false;  // 1x1, no padding, one group
};

using Conv2d = basic_conv2d<>;

}  // namespace opfuse
