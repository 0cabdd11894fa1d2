// unfused<Main, Epilogues...>: the same layer run op by op, as a framework without fusion runs it. The
// main op writes its full output (no folding), then every epilogue is a separate pass over the output.
// Same constructor and call as fused<>, so tests and benchmarks put the two side by side.
#pragma once

#include "composition.hpp"
#include "op/epilogue_pass.hpp"

namespace opfuse {

template <class Main, class... Eps>
class unfused : public detail::composition<Main, Eps...> {
    using base = detail::composition<Main, Eps...>;

public:
    explicit unfused(typename Main::params mp, const typename Eps::params&... ep)
        : base(std::tuple<Eps...>(Eps(ep)...), Main(without_folding(mp))) {}

    template <class... Args>
    void operator()(const typename base::input_view& in, const typename base::output_view& out,
                    Args&&... args) const {
        this->main_.check(in, out);
        this->dispatch(
            out,
            [&](const auto& operands, auto& exec) {
                static const std::tuple<> none;
                this->main_.run(in, out, chain<>(none, 0, {}), exec);
                passes(Main::as_tensor4(out), operands, exec, std::index_sequence_for<Eps...>{});
            },
            std::forward<Args>(args)...);
    }

private:
    using Arch = typename Main::arch;

    static typename Main::params without_folding(typename Main::params mp) {
        if constexpr (Main::can_fold) mp.fold_batchnorm = false;
        return mp;
    }

    template <class Operands, class Exec, std::size_t... I>
    void passes(const TensorView<float, 4>& t, const Operands& operands, Exec& exec,
                std::index_sequence<I...>) const {
        if constexpr (sizeof...(I) > 0) {  // (without epilogues, GCC 12 calls `k` set but unused)
            std::size_t k = 0;                 // next operand
            auto one = [&](const auto& e) {
                using E = std::decay_t<decltype(e)>;
                const TensorView<const float, 4>* operand = nullptr;
                if constexpr (reads_tensor_v<E>) operand = &operands[k++];
                detail::epilogue_pass<Arch>(e, t, operand, exec);
            };
            (one(std::get<I>(this->eps_)), ...);
        } else {
            (void)t, (void)operands, (void)exec;
        }
    }
};

}  // namespace opfuse
