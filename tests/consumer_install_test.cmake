# CTest script: strata used from another CMake project (README, "Using strata from CMake").
#   1. installs this build into WORK_DIR/prefix (cmake --install);
#   2. configures examples/consumer against it with find_package(strata), builds and runs it;
#   3. checks the installed tool finds the installed runtime headers;
#   4. configures (generates only: building strata again would take minutes) the same consumer
#      with add_subdirectory(<strata source>) instead.
# Works with and without a CUDA toolkit. Any failing step fails the test with its output.
foreach(var STRATA_SOURCE_DIR STRATA_BUILD_DIR STRATA_VERSION WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "consumer_install_test: ${var} is not set")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer_install_test: ${name} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ok")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Keep the consumer's lookups like strata's own configure.
set(cuda_args)
if(NOT STRATA_ENABLE_CUDA OR CUDA_LOOKUP_DISABLED)
  set(cuda_args -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
endif()

# 1. install
step("install into ${prefix}" ${CMAKE_COMMAND} --install ${STRATA_BUILD_DIR} --prefix ${prefix})
foreach(f include/strata/ir/kernel_graph.h include/strata/ir/op_table.def
          share/strata/runtime/strata_rt/strata_rt.cuh lib/cmake/strata/strata-config.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "consumer_install_test: ${f} was not installed")
  endif()
endforeach()
if(STRATA_HAVE_GPU)
  set(gpu_header_expected TRUE)
else()
  set(gpu_header_expected FALSE)
endif()
if(EXISTS ${prefix}/include/strata/gpu/gpu_jit.h)
  set(gpu_header_installed TRUE)
else()
  set(gpu_header_installed FALSE)
endif()
if(NOT gpu_header_installed STREQUAL gpu_header_expected)
  message(FATAL_ERROR "consumer_install_test: include/strata/gpu/gpu_jit.h installed: "
                      "${gpu_header_installed}; built with strata_gpu: ${gpu_header_expected}")
endif()

# 2. find_package(strata) from the installed prefix; build and run.
set(consumer ${STRATA_SOURCE_DIR}/examples/consumer)
step("configure the consumer with find_package(strata)"
     ${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/build -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
     -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix} ${cuda_args})
string(FIND "${step_output}" "strata ${STRATA_VERSION} from ${prefix}/" at)
if(at LESS 0)
  message(FATAL_ERROR "consumer_install_test: the consumer did not find the installed "
                      "package:\n${step_output}")
endif()
string(FIND "${step_output}" "strata::gpu: yes" at)
if(STRATA_HAVE_GPU AND at LESS 0)
  message(FATAL_ERROR "consumer_install_test: strata::gpu missing from the package:\n"
                      "${step_output}")
endif()
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
if(EXISTS ${WORK_DIR}/build/strata_consumer_gpu)
  step("run the GPU consumer (no GPU needed)" ${WORK_DIR}/build/strata_consumer_gpu)
  message(STATUS "${step_output}")
endif()
step("run the consumer" ${WORK_DIR}/build/strata_consumer ${consumer}/rmsnorm_matmul.strata)
message(STATUS "${step_output}")
string(FIND "${step_output}" "matches the plain loops" at)
if(at LESS 0)
  message(FATAL_ERROR "consumer_install_test: unexpected consumer output:\n${step_output}")
endif()

# 3. The installed tool works and finds the installed runtime headers.
if(EXISTS ${prefix}/bin/strata)
  step("installed tool: check" ${prefix}/bin/strata check ${consumer}/rmsnorm_matmul.strata)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=STRATA_RUNTIME_DIR
                          ${prefix}/bin/strata device
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(REAL_PATH ${prefix}/share/strata/runtime want)
  string(FIND "${out}" "runtime headers: ${want}\n" at)
  if(at LESS 0)
    message(FATAL_ERROR "consumer_install_test: the installed tool does not use the installed "
                        "runtime headers (${want}):\n${out}${err}")
  endif()
  message(STATUS "installed tool uses ${want}: ok")
endif()

# 4. add_subdirectory(strata): configure and generate.
step("configure the consumer with add_subdirectory(strata)"
     ${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/subdir -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
     -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DSTRATA_CONSUMER_SOURCE=${STRATA_SOURCE_DIR}
     ${cuda_args})
string(FIND "${step_output}" "strata ${STRATA_VERSION} from source ${STRATA_SOURCE_DIR}" at)
if(at LESS 0)
  message(FATAL_ERROR "consumer_install_test: add_subdirectory mode not taken:\n${step_output}")
endif()
