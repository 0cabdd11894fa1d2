// The executor concept: anything with
//     int num_threads() const;
//     template <class F> void parallel_for(index_t n, F&& f);   // calls f(i) once for each i in [0, n)
// Kernels split their work into independent tasks that each write a disjoint part of the output with
// the same arithmetic whatever thread runs them, so results are bitwise identical for any thread count.
// serial_executor is the default; thread_pool.hpp ships a std::thread pool, openmp.hpp an OpenMP adapter,
// and a caller's own pool plugs in by providing the two functions.
#pragma once

#include <type_traits>
#include <utility>

#include "../core/tensor.hpp"

namespace opfuse {

struct serial_executor {
    int num_threads() const { return 1; }
    template <class F>
    void parallel_for(index_t n, F&& f) const {
        for (index_t i = 0; i < n; ++i) f(i);
    }
};

namespace detail {
struct any_task {
    void operator()(index_t) const {}
};
}  // namespace detail

template <class T, class = void>
struct is_executor : std::false_type {};
template <class T>
struct is_executor<T, std::void_t<decltype(std::declval<T&>().num_threads()),
                                  decltype(std::declval<T&>().parallel_for(index_t{}, detail::any_task{}))>>
    : std::true_type {};
template <class T>
inline constexpr bool is_executor_v = is_executor<std::remove_cv_t<std::remove_reference_t<T>>>::value;

}  // namespace opfuse
