// Non-owning views over the caller's memory. A rank-4 view describes an activation tensor by its
// logical dimensions (N, C, H, W) and one stride per dimension, so NHWC, NCHW and channel slices of a
// larger tensor are all the same type; nothing is copied. A rank-2 view is a row-major matrix (M, K).
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

namespace opfuse {

using index_t = std::int64_t;

enum class Layout { NHWC, NCHW, Strided };

template <class T, int Rank>
class TensorView {
public:
    using value_type = T;
    static constexpr int rank = Rank;

    constexpr TensorView() = default;
    constexpr TensorView(T* data, std::array<index_t, Rank> shape, std::array<index_t, Rank> strides)
        : data_(data), shape_(shape), strides_(strides) {}

    // A view of mutable data is also a view of const data.
    template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
    constexpr TensorView(const TensorView<U, Rank>& other)  // NOLINT: implicit by design
        : data_(other.data()), shape_(other.shape()), strides_(other.strides()) {}

    constexpr T* data() const { return data_; }
    constexpr const std::array<index_t, Rank>& shape() const { return shape_; }
    constexpr const std::array<index_t, Rank>& strides() const { return strides_; }
    constexpr index_t shape(int d) const { return shape_[d]; }
    constexpr index_t stride(int d) const { return strides_[d]; }
    constexpr index_t size() const {
        index_t s = 1;
        for (index_t d : shape_) s *= d;
        return s;
    }

    // Rank-4 accessors, logical order N, C, H, W.
    constexpr index_t n() const { return shape_[0]; }
    constexpr index_t c() const { return shape_[1]; }
    constexpr index_t h() const { return shape_[2]; }
    constexpr index_t w() const { return shape_[3]; }
    constexpr index_t offset(index_t n, index_t c, index_t h, index_t w) const {
        return n * strides_[0] + c * strides_[1] + h * strides_[2] + w * strides_[3];
    }
    constexpr T& operator()(index_t n, index_t c, index_t h, index_t w) const {
        return data_[offset(n, c, h, w)];
    }

    // Dense layouts are recognised from the strides; anything else (a channel slice, a padded row) is
    // Strided and still accepted by every op.
    constexpr Layout layout() const {
        static_assert(Rank == 4, "layout() is defined for rank-4 activation views");
        const auto& s = strides_;
        if (s[1] == 1 && s[3] == shape_[1] && s[2] == shape_[3] * shape_[1] && s[0] == shape_[2] * s[2])
            return Layout::NHWC;
        if (s[3] == 1 && s[2] == shape_[3] && s[1] == shape_[2] * shape_[3] && s[0] == shape_[1] * s[1])
            return Layout::NCHW;
        return Layout::Strided;
    }

    // Same logical shape (the strides may differ).
    template <class U>
    constexpr bool same_shape(const TensorView<U, Rank>& other) const {
        return shape_ == other.shape();
    }

private:
    T* data_ = nullptr;
    std::array<index_t, Rank> shape_{};
    std::array<index_t, Rank> strides_{};
};

// A dense NHWC tensor: memory order N, H, W, C.
template <class T>
constexpr TensorView<T, 4> nhwc(T* data, index_t n, index_t h, index_t w, index_t c) {
    return {data, {n, c, h, w}, {h * w * c, 1, w * c, c}};
}

// A dense NCHW tensor: memory order N, C, H, W.
template <class T>
constexpr TensorView<T, 4> nchw(T* data, index_t n, index_t c, index_t h, index_t w) {
    return {data, {n, c, h, w}, {c * h * w, h * w, w, 1}};
}

// A tensor of the given logical shape in the given dense layout.
template <class T>
constexpr TensorView<T, 4> make_view(T* data, Layout layout, index_t n, index_t c, index_t h, index_t w) {
    return layout == Layout::NCHW ? nchw(data, n, c, h, w) : nhwc(data, n, h, w, c);
}

// A dense row-major matrix [rows][cols].
template <class T>
constexpr TensorView<T, 2> matrix(T* data, index_t rows, index_t cols) {
    return {data, {rows, cols}, {cols, 1}};
}

inline const char* to_string(Layout l) {
    return l == Layout::NHWC ? "NHWC" : l == Layout::NCHW ? "NCHW" : "strided";
}

// "NHWC(N=1, C=64, H=56, W=56)": used in error messages.
template <class T, int Rank>
std::string describe(const TensorView<T, Rank>& v) {
    std::ostringstream os;
    if constexpr (Rank == 4) {
        os << to_string(v.layout()) << "(N=" << v.n() << ", C=" << v.c() << ", H=" << v.h() << ", W=" << v.w()
           << ")";
    } else {
        os << "[";
        for (int d = 0; d < Rank; ++d) os << (d ? " x " : "") << v.shape(d);
        os << "]";
    }
    return os.str();
}

}  // namespace opfuse
