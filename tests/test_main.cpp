// The Catch2 main of opfuse_tests. Set OPFUSE_TEST_REPORT=1 to print the largest observed
// error/tolerance ratio of the run (how much headroom the tolerances in support.hpp have).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "support.hpp"

int main(int argc, char* argv[]) {
    const int result = Catch::Session().run(argc, argv);
    if (std::getenv("OPFUSE_TEST_REPORT"))
        std::printf("largest |got - ref| / tolerance seen: %.4g\n", test::worst_ratio_seen());
    return result;
}
