// An owning, 64-byte aligned, zero-initialised float buffer: packed weights and per-channel epilogue
// operands live here so that kernels can use aligned full-vector loads (padding lanes hold zeros).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace opfuse {

class aligned_buffer {
public:
    static constexpr std::size_t alignment = 64;

    aligned_buffer() = default;
    explicit aligned_buffer(std::size_t count) : size_(count) {
        if (count == 0) return;
        std::size_t bytes = (count * sizeof(float) + alignment - 1) / alignment * alignment;
        data_ = static_cast<float*>(std::aligned_alloc(alignment, bytes));
        if (!data_) throw std::bad_alloc();
        std::memset(data_, 0, bytes);
    }
    aligned_buffer(const aligned_buffer& other) : aligned_buffer(other.size_) {
        if (size_) std::memcpy(data_, other.data_, size_ * sizeof(float));
    }
    aligned_buffer(aligned_buffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    aligned_buffer& operator=(aligned_buffer other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        return *this;
    }
    ~aligned_buffer() { std::free(data_); }

    float* data() { return data_; }
    const float* data() const { return data_; }
    std::size_t size() const { return size_; }
    float& operator[](std::size_t i) { return data_[i]; }
    const float& operator[](std::size_t i) const { return data_[i]; }

private:
    float* data_ = nullptr;
    std::size_t size_ = 0;
};

// Copies `values` into an aligned buffer padded with zeros to a multiple of `pad` elements, so that
// a kernel may load a whole vector at any channel < values.size().
inline aligned_buffer padded_copy(const float* values, std::size_t count, std::size_t pad = 64) {
    aligned_buffer out((count + pad - 1) / pad * pad);
    if (count) std::memcpy(out.data(), values, count * sizeof(float));
    return out;
}

}  // namespace opfuse
