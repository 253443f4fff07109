# Install and package-export rules (included by CMakeLists.txt when STRATA_INSTALL is on).
#
#   <prefix>/include/strata/*/*.h                public headers (those of strata::gpu only with it)
#   <prefix>/lib/libstrata_core.a, libstrata_gpu.a
#   <prefix>/bin/strata                        the tool (when built)
#   <prefix>/share/strata/runtime/strata_rt/   device runtime headers included by emitted CUDA
#   <prefix>/lib/cmake/strata/                 strata-config.cmake, version, targets
#
# `cmake --install build --prefix DIR` installs into DIR; `find_package(strata)` then works with
# DIR on CMAKE_PREFIX_PATH (README, "Using strata from CMake").

set(STRATA_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/strata)

install(TARGETS ${STRATA_EXPORTED_TARGETS} EXPORT strata-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers. A header of the GPU runtime (include/strata/<name>.h for a src/gpu/<name>.cc)
# is installed only with strata_gpu, so that no installed header declares what cannot be linked.
set(STRATA_HEADER_EXCLUDES)
if(NOT STRATA_HAVE_GPU)
  foreach(src ${STRATA_GPU_SOURCES})
    get_filename_component(name ${src} NAME_WE)
    list(APPEND STRATA_HEADER_EXCLUDES PATTERN ${name}.h EXCLUDE)
  endforeach()
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/strata DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        ${STRATA_HEADER_EXCLUDES})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/ DESTINATION ${STRATA_RUNTIME_INSTALL_DIR})

install(EXPORT strata-targets NAMESPACE strata:: DESTINATION ${STRATA_CMAKE_INSTALL_DIR})
configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/strata-config.cmake.in
    ${PROJECT_BINARY_DIR}/strata-config.cmake
    INSTALL_DESTINATION ${STRATA_CMAKE_INSTALL_DIR}
    PATH_VARS STRATA_RUNTIME_INSTALL_DIR)
# 0.x: a minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/strata-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/strata-config.cmake
              ${PROJECT_BINARY_DIR}/strata-config-version.cmake
              ${PROJECT_SOURCE_DIR}/cmake/strata-z3.cmake
        DESTINATION ${STRATA_CMAKE_INSTALL_DIR})
