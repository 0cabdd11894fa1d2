// An executor over OpenMP, for builds that use it (compile with -fopenmp). Not included by opfuse.hpp.
#pragma once

#ifndef _OPENMP
#error "opfuse/parallel/openmp.hpp needs OpenMP: compile with -fopenmp (CMake: OpenMP::OpenMP_CXX)"
#endif

#include <omp.h>

#include "../core/tensor.hpp"

namespace opfuse {

struct openmp_executor {
    int num_threads() const { return omp_get_max_threads(); }
    template <class F>
    void parallel_for(index_t n, F&& f) const {
#pragma omp parallel for schedule(dynamic, 1)
        for (index_t i = 0; i < n; ++i) f(i);
    }
};

}  // namespace opfuse
