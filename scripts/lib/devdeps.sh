# Sourced by the GPU scripts: when .devdeps/ (scripts/fetch-device-deps.sh) is present, point
# CMake and the loader at the build dependencies unpacked there. Sets the array `cmake_deps`
# (extra cmake arguments; empty without .devdeps). Expects `root` (the repository root).
cmake_deps=()
if [ -d "$root/.devdeps/usr" ]; then
  deps=$root/.devdeps/usr
  lib=$deps/lib/x86_64-linux-gnu
  echo "using build dependencies from $deps"
  export CMAKE_PREFIX_PATH=$deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  cmake_deps=(-DGTest_DIR="$lib/cmake/GTest" -Dnlohmann_json_DIR="$deps/share/cmake/nlohmann_json"
              -DCLI11_DIR="$deps/share/cmake/CLI11" -DZ3_INCLUDE_DIR="$deps/include"
              -DZ3_LIBRARY="$lib/libz3.so")
fi
