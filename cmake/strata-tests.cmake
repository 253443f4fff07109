# The test suite (included by CMakeLists.txt when STRATA_BUILD_TESTS is on): one GoogleTest
# executable per tests/*_test.cc, run from the source root, plus the package test
# (tests/consumer_install_test.cmake).
#
# What a test needs decides whether it is built and registered, so that no test skips itself:
#   - most tests need neither CUDA nor a GPU and always run (`make test`);
#   - STRATA_NVCC_TESTS compile emitted CUDA with the toolkit (nvcc, or its headers for the CPU
#     emulator) but need no GPU: registered only when a CUDA toolkit with nvcc is found,
#     labelled `nvcc`, and run by `make test` then;
#   - STRATA_GPU_LIB_TESTS link the GPU runtime (strata_gpu) and compile with nvcc but need no
#     GPU: registered only with strata_gpu, labelled `nvcc`;
#   - *_gpu_test need strata_gpu and a GPU: registered only with strata_gpu, labelled `gpu`,
#     excluded by `make test` (scripts/gpu-check.sh runs them on a GPU machine).
# The configure output lists the tests left out and why.
find_package(GTest REQUIRED)
enable_testing()

set(STRATA_NVCC_TESTS codegen_compile_test codegen_emulation_test mpk_emulation_test codegen_ragged_test
    codegen_mma_padding_test codegen_task_entry_test codegen_library_matmul_test
    wgmma_emulation_test codegen_wgmma_test)
set(STRATA_GPU_LIB_TESTS gpu_jit_test packed_outputs_runtime_test)

set(STRATA_HAVE_NVCC OFF)
if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  set(STRATA_HAVE_NVCC ON)
endif()

set(strata_tests_left_out)
file(GLOB STRATA_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/*_test.cc)
foreach(test_src ${STRATA_TESTS})
  get_filename_component(test_name ${test_src} NAME_WE)
  set(labels)
  set(env "STRATA_BIN=$<TARGET_FILE:strata>;STRATA_CACHE_DIR=${PROJECT_BINARY_DIR}/test-cache")
  if(test_name MATCHES "_gpu_test$")
    if(NOT STRATA_HAVE_GPU)
      list(APPEND strata_tests_left_out "${test_name} (needs strata_gpu and a GPU)")
      continue()
    endif()
    set(labels gpu)
  elseif(test_name IN_LIST STRATA_GPU_LIB_TESTS)
    if(NOT STRATA_HAVE_GPU)
      list(APPEND strata_tests_left_out "${test_name} (needs strata_gpu and nvcc)")
      continue()
    endif()
    set(labels nvcc)
    list(APPEND env "NVCC=${CUDAToolkit_NVCC_EXECUTABLE}")
  elseif(test_name IN_LIST STRATA_NVCC_TESTS)
    if(NOT STRATA_HAVE_NVCC)
      list(APPEND strata_tests_left_out "${test_name} (needs nvcc)")
      continue()
    endif()
    set(labels nvcc)
    list(APPEND env "NVCC=${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  add_executable(${test_name} ${test_src})
  target_include_directories(${test_name} PRIVATE ${PROJECT_SOURCE_DIR}/src
                                                  ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${test_name} PRIVATE strata_core ${STRATA_GPU_LIB} GTest::gtest
                                             GTest::gtest_main)
  add_test(NAME ${test_name} COMMAND ${test_name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${test_name} PROPERTIES ENVIRONMENT "${env}")
  if(labels)
    set_tests_properties(${test_name} PROPERTIES LABELS "${labels}")
  endif()
endforeach()

# The benchmark scripts' own tests (bench/tests/): Python, standard library only here (the
# tests of the PyTorch interpreter say they are skipped without torch; scripts/python-test.sh
# runs them with it). STRATA_TOOL: the tool the suite's programs are compared with.
add_test(NAME bench_python_test
         COMMAND python3 -m unittest discover -s ${PROJECT_SOURCE_DIR}/bench/tests
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_python_test PROPERTIES TIMEOUT 300
                     ENVIRONMENT "STRATA_TOOL=$<TARGET_FILE:strata>")

# The module order (docs/architecture.md, "Module order"): every #include of the sources
# against the order defined there; then the checker's own tests, and those of the header
# grouping script (tools/tests/).
add_test(NAME layering_test COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/check_layering.py
                                    --root ${PROJECT_SOURCE_DIR})
add_test(NAME tools_python_test
         COMMAND python3 -m unittest discover -s ${PROJECT_SOURCE_DIR}/tools/tests -p "*_test.py"
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(layering_test tools_python_test PROPERTIES TIMEOUT 120)

# The installed package from outside: installs this build into a prefix under the build
# directory, builds examples/consumer against it with find_package(strata), runs it, and
# configures the same consumer with add_subdirectory(strata).
if(STRATA_INSTALL)
  add_test(NAME consumer_install_test
           COMMAND ${CMAKE_COMMAND}
                   -DSTRATA_SOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DSTRATA_BUILD_DIR=${PROJECT_BINARY_DIR}
                   -DSTRATA_VERSION=${PROJECT_VERSION}
                   -DWORK_DIR=${PROJECT_BINARY_DIR}/consumer-test
                   -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                   -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
                   -DSTRATA_HAVE_GPU=${STRATA_HAVE_GPU}
                   -DSTRATA_ENABLE_CUDA=${STRATA_ENABLE_CUDA}
                   -DCUDA_LOOKUP_DISABLED=${CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit}
                   -P ${PROJECT_SOURCE_DIR}/tests/consumer_install_test.cmake)
  set_tests_properties(consumer_install_test PROPERTIES LABELS package)
else()
  list(APPEND strata_tests_left_out "consumer_install_test (STRATA_INSTALL is OFF)")
endif()

if(strata_tests_left_out)
  list(JOIN strata_tests_left_out "; " strata_left_out_text)
  message(STATUS "strata: tests not registered in this configuration: ${strata_left_out_text}")
endif()
