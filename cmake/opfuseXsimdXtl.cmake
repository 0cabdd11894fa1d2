# Debian 12's xsimd 8.1 package exports INTERFACE_LINK_LIBRARIES "xtl" without a find_dependency(xtl),
# so without xtl installed every consumer links with -lxtl and fails. opfuse does not use xtl (it only
# serves XSIMD_ENABLE_XTL_COMPLEX): give the name an empty target when the real one is not available.
if(NOT TARGET xtl)
    find_package(xtl QUIET)
    if(NOT TARGET xtl)
        add_library(xtl INTERFACE IMPORTED GLOBAL)
    endif()
endif()
