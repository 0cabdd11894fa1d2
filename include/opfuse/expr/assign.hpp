// assign(out, expression[, executor][, store_policy]): evaluates an elementwise expression into `out` in
// one pass: every element of every operand is read once and every output element written once.
//
// The loop is chosen from the strides of the output and of the tensor operands (all checked first):
//   flat    all dense NHWC, C <= 512: the tensor is one array; the channel of each vector is tracked
//           modulo C and per-channel operands are read from a private wrapped copy (C + vector width
//           values on the stack), so even C = 3 or C = 17 runs at full vector width;
//   planes  all dense NCHW: each (n, c) plane is one array and per-channel operands are broadcast;
//   pixels  channels contiguous (channel slices, NHWC with C > 512): one run of C channels per pixel;
//   rows    W contiguous (strided NCHW-like views): one run per (n, c, h) row, per-channel broadcast;
//   gather  anything else (e.g. an NHWC output with an NCHW operand): channel vectors gathered and
//           scattered pixel by pixel -- correct, not fast.
// Outputs of at least `streaming_threshold_bytes` are written with non-temporal stores (they would not
// stay in cache anyway, and these skip the read of each output line); smaller ones with ordinary stores
// so that the next layer finds them in cache. store_policy overrides the choice.
//
// Every element is computed by the same compiled vector code (eval_vectors; partial vectors are staged
// through it), and work is split into fixed chunks of the output whatever the thread count, so results
// are bitwise identical for any executor, store policy, alignment and layout. Nothing is allocated on
// the heap: the per-call state (operand pointers, wrapped per-channel copies) lives on the stack.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "../core/error.hpp"
#include "../kernel/vector_io.hpp"
#include "../parallel/executor.hpp"
#include "nodes.hpp"
#include "stream.hpp"

// GCC 12 reports false -Wmaybe-uninitialized / -Wuninitialized warnings inside AVX-512 intrinsics that
// take _mm512_undefined_ps() as their pass-through operand (xsimd::max, used by Relu, inlined into a
// loop; GCC bug 105593, fixed in GCC 13). The loops of this file are where epilogues get inlined, so the
// warnings are silenced here (expr.hpp also includes xsimd itself with them off).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace opfuse::expr {

enum class store_policy {
    automatic,  // streaming stores for outputs of at least streaming_threshold_bytes
    regular,    // always ordinary stores (the output stays in cache for its consumer)
    streaming,  // always non-temporal stores (where the ISA has them)
};

// Outputs at least this large are written with streaming stores by store_policy::automatic: beyond the
// 1 MiB L2 per core of the target machine and the share of L3 a tensor can expect to keep.
inline constexpr std::size_t streaming_threshold_bytes = std::size_t{8} << 20;

namespace detail {

// Per-channel operands longer than this run the pixel loop instead of the flat one (the wrapped copy of
// each lives on the stack).
inline constexpr index_t max_wrapped_channels = 512;
// Output floats per task (64 KiB): enough to amortise the task hand-out, small enough to balance.
inline constexpr index_t chunk_floats = 16384;

using tensor4 = TensorView<const float, 4>;

// Dense in the given layout, ignoring the strides of dimensions of size 1 (they are never stepped).
inline bool dense_like(const tensor4& v, const std::array<index_t, 4>& strides) {
    for (int d = 0; d < 4; ++d)
        if (v.shape(d) > 1 && v.stride(d) != strides[static_cast<std::size_t>(d)]) return false;
    return true;
}
inline std::array<index_t, 4> nhwc_strides(const tensor4& v) {
    return {v.h() * v.w() * v.c(), 1, v.w() * v.c(), v.c()};
}
inline std::array<index_t, 4> nchw_strides(const tensor4& v) {
    return {v.c() * v.h() * v.w(), v.h() * v.w(), v.w(), 1};
}

// ---- evaluation ---------------------------------------------------------------------------------------

#if defined(__GNUC__) && !defined(__clang__)
#define OPFUSE_EXPR_KERNEL __attribute__((noinline, noclone))
#elif defined(__clang__)
#define OPFUSE_EXPR_KERNEL __attribute__((noinline))
#else
#define OPFUSE_EXPR_KERNEL
#endif

// Where the leaves of an expression read: tensor leaf K at t[K] + j, per-channel leaf K at ch[K] + c,
// one full vector each.
template <class Arch, int NT, int NC>
struct operands {
    using B = xsimd::batch<float, Arch>;
    std::array<const float*, NT> t{};
    std::array<const float*, NC> ch{};

    template <int K>
    OPFUSE_ALWAYS_INLINE B tensor(index_t j) const {
        return B::load_unaligned(t[K] + j);
    }
    template <int K>
    OPFUSE_ALWAYS_INLINE B channel(index_t c) const {
        return B::load_unaligned(ch[K] + c);
    }
};

// THE place where an expression is evaluated: `count` consecutive vectors, out[j] for j < count * S,
// channel c advancing by `step` modulo C per vector (C = 1, step = 0 when the channel is fixed).
// It is compiled once per expression and never inlined or cloned, and partial vectors (channel tails,
// the head before an aligned streaming store, strided tensors) are staged through it too: every element
// is computed by the same instructions wherever it lies, so results are bitwise identical for any
// thread count, store policy, output alignment or layout. (Two inlined copies could differ in the last
// bit: compilers contract a * b + c into an fma in one copy and not in another.)
template <class Arch, class E, class Ops>
OPFUSE_EXPR_KERNEL void eval_vectors(const E& e, const Ops& ops, float* out, index_t count, index_t c, index_t C,
                                     index_t step, bool stream) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = index_t(B::size);
    const Ops o = ops;
    for (index_t v = 0, j = 0; v < count; ++v, j += S) {
        const B y = e.template eval<Arch, 0, 0>(o, j, c);
        if (stream) stream_store<Arch>(out + j, y);
        else y.store_unaligned(out + j);
        c += step;
        if (c >= C) c -= C;
    }
}

// Evaluates `lanes` (< = S) elements: tensor K's lane l at tp[K][l * ts[K]], per-channel K's at cp[K][l];
// result lane l to out[l * os]. Copies them into zero-padded vectors and runs eval_vectors on those.
template <class Arch, class E, std::size_t NT, std::size_t NC>
void eval_staged(const E& e, const std::array<const float*, NT>& tp, const std::array<index_t, NT>& ts,
                 const std::array<const float*, NC>& cp, int lanes, float* out, index_t os) {
    constexpr int S = int(xsimd::batch<float, Arch>::size);
    alignas(64) float tb[NT > 0 ? NT : 1][S] = {};
    alignas(64) float cb[NC > 0 ? NC : 1][S] = {};
    alignas(64) float ob[S];
    operands<Arch, int(NT), int(NC)> st;
    for (std::size_t k = 0; k < NT; ++k) {
        for (int l = 0; l < lanes; ++l) tb[k][l] = tp[k][l * ts[k]];
        st.t[k] = tb[k];
    }
    for (std::size_t k = 0; k < NC; ++k) {
        for (int l = 0; l < lanes; ++l) cb[k][l] = cp[k][l];
        st.ch[k] = cb[k];
    }
    eval_vectors<Arch>(e, st, ob, 1, 0, 1, 0, false);
    for (int l = 0; l < lanes; ++l) out[l * os] = ob[l];
}

// out[0, len) for a run whose tensors are contiguous from ops.t[K] and whose per-channel operands are
// contiguous from ops.ch[K] + c (c = channel of element 0, advancing by one per element modulo C; C = 1
// for runs of one channel). With `stream`, a staged head reaches the alignment of streaming stores.
template <class Arch, class E, int NT, int NC>
void run_segment(const E& e, const operands<Arch, NT, NC>& ops, float* out, index_t len, index_t c, index_t C,
                 bool stream) {
    using B = xsimd::batch<float, Arch>;
    constexpr index_t S = index_t(B::size);
    index_t j = 0;
    auto staged = [&](index_t n) {
        std::array<const float*, NT> tp{};
        std::array<index_t, NT> ts{};
        std::array<const float*, NC> cp{};
        for (int k = 0; k < NT; ++k) tp[k] = ops.t[k] + j, ts[k] = 1;
        for (int k = 0; k < NC; ++k) cp[k] = ops.ch[k] + c;
        eval_staged<Arch>(e, tp, ts, cp, int(n), out + j, 1);
        j += n;
        c = (c + n) % C;
    };
    if (stream) {
        const index_t head = std::min(len, floats_to_alignment(out, sizeof(B)));
        if (head > 0) staged(head);
    }
    const index_t vectors = (len - j) / S;
    if (vectors > 0) {
        operands<Arch, NT, NC> o = ops;
        for (auto& p : o.t) p += j;
        eval_vectors<Arch>(e, o, out + j, vectors, c, C, S % C, stream);
        j += vectors * S;
        c = (c + vectors * S) % C;
    }
    if (j < len) staged(len - j);
}

// ---- checks -------------------------------------------------------------------------------------------

// Conditions are tested before any message is built: a successful call allocates nothing.
template <class E>
void validate(const TensorView<float, 4>& out, const leaves<E>& lv) {
    using opfuse::detail::fail;
    if (out.n() < 0 || out.c() < 0 || out.h() < 0 || out.w() < 0)
        fail("expr::assign: negative output size ", describe(out));
    if (out.data() == nullptr && out.size() != 0) fail("expr::assign: the output ", describe(out), " is null");
    for (std::size_t k = 0; k < lv.tensors.size(); ++k) {
        const tensor4& t = lv.tensors[k];
        if (t.shape() != out.shape())
            fail("expr::assign: tensor operand #", k, " ", describe(t), " must have the output's shape ",
                 describe(out));
        if (t.data() == nullptr && out.size() != 0) fail("expr::assign: tensor operand #", k, " is null");
    }
    for (std::size_t m = 0; m < lv.channels.size(); ++m) {
        const span<const float>& v = lv.channels[m];
        if (static_cast<index_t>(v.size()) != out.c())
            fail("expr::assign: per_channel operand #", m, " has ", v.size(), " values but the output ",
                 describe(out), " has C=", out.c(), " channels");
        if (v.data() == nullptr && !v.empty()) fail("expr::assign: per_channel operand #", m, " is null");
    }
}

// ---- the loop kinds -----------------------------------------------------------------------------------

// All dense NHWC: one array of N*H*W*C values, cut into chunks; per-channel operands from wrapped copies.
template <class Arch, class E, class Exec>
void run_flat(const TensorView<float, 4>& out, const E& e, const leaves<E>& lv, Exec& exec, bool stream) {
    constexpr int NT = E::tensors, NC = E::channels;
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    const index_t C = out.c(), total = out.size();
    // ext[m][i] = values[m][i mod C] for i < C + S: a full vector can be loaded at any channel c < C.
    alignas(64) float ext[NC > 0 ? NC : 1][max_wrapped_channels + S];
    operands<Arch, NT, NC> base;
    for (int m = 0; m < NC; ++m) {
        const float* v = lv.channels[m].data();
        for (index_t i = 0; i < C + S; ++i) ext[m][i] = v[i % C];
        base.ch[m] = ext[m];
    }
    for (int k = 0; k < NT; ++k) base.t[k] = lv.tensors[k].data();
    const index_t tasks = (total + chunk_floats - 1) / chunk_floats;
    exec.parallel_for(tasks, [&](index_t task) {
        const index_t start = task * chunk_floats, len = std::min(chunk_floats, total - start);
        operands<Arch, NT, NC> ops = base;
        for (auto& p : ops.t) p += start;
        run_segment<Arch>(e, ops, out.data() + start, len, start % C, C, stream);
        if (stream) stream_fence();
    });
}

// W contiguous everywhere (NCHW and NCHW-like strided views): runs along W of one channel, whole H*W
// planes when every tensor's planes are dense; per-channel operands broadcast. Tasks are chunks of a
// plane, or blocks of rows of one (n, c).
template <class Arch, class E, class Exec>
void run_rows(const TensorView<float, 4>& out, const E& e, const leaves<E>& lv, Exec& exec, bool stream,
              bool dense_planes) {
    constexpr int NT = E::tensors, NC = E::channels;
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    const index_t C = out.c();
    const index_t H = dense_planes ? 1 : out.h(), W = dense_planes ? out.h() * out.w() : out.w();
    // A task: `rows` whole rows, or (rows == 1) the part-th piece of `parts` of one row.
    const index_t parts = (W + chunk_floats - 1) / chunk_floats, piece = (W + parts - 1) / parts;
    const index_t rows = parts > 1 ? 1 : std::max<index_t>(1, chunk_floats / W);
    const index_t blocks = (H + rows - 1) / rows;
    exec.parallel_for(out.n() * C * blocks * parts, [&](index_t task) {
        const index_t part = task % parts, rest = task / parts;
        const index_t blk = rest % blocks, nc = rest / blocks, n = nc / C, c = nc % C;
        const index_t h1 = std::min(H, (blk + 1) * rows), w0 = part * piece, w1 = std::min(W, w0 + piece);
        alignas(64) float bc[NC > 0 ? NC : 1][S];
        operands<Arch, NT, NC> ops;
        for (int m = 0; m < NC; ++m) {
            for (index_t l = 0; l < S; ++l) bc[m][l] = lv.channels[m][static_cast<std::size_t>(c)];
            ops.ch[m] = bc[m];
        }
        // (a dense plane is one row of H*W: element w0 of it is at offset(n, c, 0, 0) + w0)
        auto at = [&](const auto& t, index_t h) {
            return t.data() + (dense_planes ? t.offset(n, c, 0, 0) + w0 : t.offset(n, c, h, w0));
        };
        for (index_t h = blk * rows; h < h1; ++h) {
            for (int k = 0; k < NT; ++k) ops.t[k] = at(lv.tensors[k], h);
            run_segment<Arch>(e, ops, at(out, h), w1 - w0, 0, 1, stream);
        }
        if (stream) stream_fence();
    });
}

// Channels contiguous everywhere (channel slices, NHWC with C > max_wrapped_channels): one run of C
// per pixel. Or, with Gather, any strides: each channel vector gathered and scattered.
template <class Arch, bool Gather, class E, class Exec>
void run_pixels(const TensorView<float, 4>& out, const E& e, const leaves<E>& lv, Exec& exec, bool stream) {
    constexpr int NT = E::tensors, NC = E::channels;
    constexpr index_t S = index_t(xsimd::batch<float, Arch>::size);
    const index_t C = out.c(), H = out.h(), W = out.w();
    const index_t rows = std::max<index_t>(1, chunk_floats / (W * C)), blocks = (H + rows - 1) / rows;
    exec.parallel_for(out.n() * blocks, [&](index_t task) {
        const index_t n = task / blocks, h0 = (task % blocks) * rows, h1 = std::min(H, h0 + rows);
        operands<Arch, NT, NC> ops;
        for (int m = 0; m < NC; ++m) ops.ch[m] = lv.channels[m].data();
        for (index_t h = h0; h < h1; ++h)
            for (index_t w = 0; w < W; ++w) {
                for (int k = 0; k < NT; ++k) ops.t[k] = lv.tensors[k].data() + lv.tensors[k].offset(n, 0, h, w);
                float* o = out.data() + out.offset(n, 0, h, w);
                if constexpr (!Gather) {
                    run_segment<Arch>(e, ops, o, C, 0, C, stream);
                } else {
                    std::array<index_t, NT> ts{};
                    for (int k = 0; k < NT; ++k) ts[k] = lv.tensors[k].stride(1);
                    for (index_t c = 0; c < C; c += S) {
                        std::array<const float*, NT> tp{};
                        std::array<const float*, NC> cp{};
                        for (int k = 0; k < NT; ++k) tp[k] = ops.t[k] + c * ts[k];
                        for (int m = 0; m < NC; ++m) cp[m] = ops.ch[m] + c;
                        eval_staged<Arch>(e, tp, ts, cp, int(std::min(S, C - c)), o + c * out.stride(1),
                                          out.stride(1));
                    }
                }
            }
        if (stream) stream_fence();
    });
}

template <class Arch, class E, class Exec>
void assign(const TensorView<float, 4>& out, const E& e, Exec& exec, store_policy policy) {
    const leaves<E> lv(e);
    validate(out, lv);
    if (out.size() == 0) return;

    const tensor4 o = out;
    const index_t C = out.c(), W = out.w();
    bool nhwc = dense_like(o, nhwc_strides(o)), nchw = dense_like(o, nchw_strides(o));
    bool channels_contiguous = C == 1 || o.stride(1) == 1, width_contiguous = W == 1 || o.stride(3) == 1;
    for (const tensor4& t : lv.tensors) {
        nhwc = nhwc && dense_like(t, nhwc_strides(o));
        nchw = nchw && dense_like(t, nchw_strides(o));
        channels_contiguous = channels_contiguous && (C == 1 || t.stride(1) == 1);
        width_contiguous = width_contiguous && (W == 1 || t.stride(3) == 1);
    }
    const bool stream =
        has_stream_store<Arch>() &&
        (policy == store_policy::streaming ||
         (policy == store_policy::automatic &&
          static_cast<std::size_t>(out.size()) * sizeof(float) >= streaming_threshold_bytes));

    if (nhwc && C <= max_wrapped_channels)
        run_flat<Arch>(out, e, lv, exec, stream);
    else if (nchw && !nhwc)
        run_rows<Arch>(out, e, lv, exec, stream, true);
    else if (channels_contiguous && (!width_contiguous || C >= W))
        run_pixels<Arch, false>(out, e, lv, exec, stream);
    else if (width_contiguous)
        run_rows<Arch>(out, e, lv, exec, stream, false);
    else
        run_pixels<Arch, true>(out, e, lv, exec, false);
}

}  // namespace detail

// out = e, in one pass, on the caller's executor. Throws std::invalid_argument naming the shapes before
// anything is written if a tensor operand does not have the output's shape or a per_channel operand does
// not have one value per output channel. `out` may be one of the tensor operands (in place) when it has
// the same strides; it must not otherwise overlap them.
template <class Arch = default_arch, class E, class Exec,
          class = std::enable_if_t<is_expr_v<E> && is_executor_v<Exec>>>
void assign(const TensorView<float, 4>& out, const E& e, Exec&& exec,
            store_policy policy = store_policy::automatic) {
    detail::assign<Arch>(out, e, exec, policy);
}

// out = e, on the calling thread.
template <class Arch = default_arch, class E, class = std::enable_if_t<is_expr_v<E>>>
void assign(const TensorView<float, 4>& out, const E& e, store_policy policy = store_policy::automatic) {
    serial_executor serial;
    detail::assign<Arch>(out, e, serial, policy);
}

}  // namespace opfuse::expr

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
