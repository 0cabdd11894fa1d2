// Storage shared by the per-channel epilogues: a private, zero-padded, aligned copy of one value per
// output channel, so that a full vector can be loaded at any channel (channel tails included).
#pragma once

#include "../core/aligned_buffer.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/span.hpp"
#include "site.hpp"

namespace opfuse::detail {

class channel_values {
public:
    channel_values() = default;
    channel_values(span<const float> values, const char* what) : count_(static_cast<index_t>(values.size())) {
        require(values.data() != nullptr && !values.empty(), what, ": per-channel values are null or empty");
        values_ = padded_copy(values.data(), values.size());
    }
    // Builds the values from a function of the channel index (e.g. a BatchNorm scale).
    template <class F>
    static channel_values generate(index_t count, F&& f) {
        channel_values cv;
        cv.count_ = count;
        cv.values_ = aligned_buffer(static_cast<std::size_t>((count + 63) / 64 * 64));
        for (index_t c = 0; c < count; ++c) cv.values_[static_cast<std::size_t>(c)] = f(c);
        return cv;
    }

    index_t size() const { return count_; }
    const float* data() const { return values_.data(); }
    float operator[](index_t c) const { return values_[static_cast<std::size_t>(c)]; }

    template <class Arch>
    OPFUSE_ALWAYS_INLINE xsimd::batch<float, Arch> at(const Site& s) const {
        if (s.along_width) return xsimd::batch<float, Arch>(values_[static_cast<std::size_t>(s.channel)]);
        return xsimd::batch<float, Arch>::load_unaligned(values_.data() + s.channel);
    }

private:
    aligned_buffer values_;
    index_t count_ = 0;
};

}  // namespace opfuse::detail
