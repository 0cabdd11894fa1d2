// A read-only view of contiguous values (std::span is C++20). Parameters such as weights, bias and
// BatchNorm statistics are passed as spans so that their length can be checked against the shapes.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

namespace opfuse {

template <class T>
class span {
public:
    constexpr span() = default;
    constexpr span(T* data, std::size_t size) : data_(data), size_(size) {}
    template <class U, class Alloc>
    span(const std::vector<U, Alloc>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit by design
    // `p.weights = load_weights();` would leave p.weights viewing a vector destroyed at the end of the
    // statement, and the op constructed later would read freed memory. Building a span from a temporary
    // stays allowed (conv2d_params{..., make_weights()} passed straight to a constructor is fine).
    template <class U, class Alloc>
    span& operator=(std::vector<U, Alloc>&&) {
        static_assert(sizeof(U) == 0,
                      "opfuse::span only views values: assigning a temporary std::vector would leave it dangling; "
                      "keep the vector in a variable that outlives the op's construction and assign that");
        return *this;
    }
    span& operator=(const span&) = default;
    span(const span&) = default;
    template <class U, std::size_t N>
    constexpr span(const std::array<U, N>& a) : data_(a.data()), size_(N) {}  // NOLINT
    template <std::size_t N>
    constexpr span(T (&a)[N]) : data_(a), size_(N) {}  // NOLINT

    constexpr T* data() const { return data_; }
    constexpr std::size_t size() const { return size_; }
    constexpr bool empty() const { return size_ == 0; }
    constexpr T& operator[](std::size_t i) const { return data_[i]; }
    constexpr T* begin() const { return data_; }
    constexpr T* end() const { return data_ + size_; }

private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace opfuse
