// One epilogue applied as its own full pass over a tensor, in place: what an op-by-op runtime does after
// the main op has written its output. Used by unfused<> (the baseline of every benchmark).
#pragma once

#include "../epilogue/site.hpp"
#include "../epilogue/traits.hpp"
#include "../kernel/vector_io.hpp"

namespace opfuse::detail {

template <class Arch, class E, class Exec>
void epilogue_pass(const E& e, const TensorView<float, 4>& t, const TensorView<const float, 4>* operand,
                   Exec& exec) {
    using B = xsimd::batch<float, Arch>;
    constexpr int S = int(B::size);
    const index_t C = t.c(), H = t.h(), W = t.w(), sc = t.stride(1);
    exec.parallel_for(t.n() * H, [&](index_t task) {
        const index_t n = task / H, y = task % H;
        for (index_t x = 0; x < W; ++x) {
            float* p = t.data() + t.offset(n, 0, y, x);
            for (index_t c = 0; c < C; c += S) {
                const Site s{n, y, x, c, int(std::min<index_t>(S, C - c))};
                B v = load_channels<Arch>(p + c * sc, sc, s.lanes);
                if constexpr (reads_tensor_v<E>)
                    v = e.apply(v, s, load_at<Arch>(*operand, s));
                else
                    v = e.apply(v, s);
                store_channels<Arch>(p + c * sc, sc, s.lanes, v);
            }
        }
    });
}

}  // namespace opfuse::detail
