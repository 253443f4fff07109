#!/usr/bin/env bash
# The Python package on a GPU machine, in one invocation (docs/python.md, "On a GPU"):
#   1. pip install . into a virtual environment that sees the machine's PyTorch
#      (--system-site-packages), with the build tools from .devdeps/wheels when the machine
#      has no network (scripts/fetch-device-deps.sh downloads them);
#   2. the GPU tests of the package (pytest -m gpu python/tests);
#   3. the Llama decoder layer benchmark (bench/llama_layer.py): eager, torch.compile and
#      backend="strata", checked against eager, timed on CUDA-graph replays.
# Output under OUT_DIR (default bench/results): gpu-python.log, <gpu>-<date>-llama.md/.json.
#
# Usage: scripts/gpu-python.sh [OUT_DIR]
# Knobs: STRATA_LLAMA_ARGS (extra arguments of bench/llama_layer.py, e.g. "--batches 1"),
#   STRATA_PY_PHASE=tests|bench|all (default all), STRATA_PY_TESTS (a pytest -k expression that
#   selects among the GPU tests, e.g. "packed"; default all of them).
# Exit: 0 all passed; 1 tests or the benchmark failed; 3 the package did not build.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results}" gpu-python.log
failed=()
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$root/build-gpu/cache}
venv=$root/build-gpu/pyenv

step "virtual environment (with the machine's PyTorch)"
python3 -m venv --system-site-packages "$venv" || exit 3
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
wheels=()
if [ -d "$root/.devdeps/wheels" ]; then wheels=(--no-index --find-links "$root/.devdeps/wheels"); fi
# --system-site-packages does not reach a PyTorch installed in the user site or another prefix
# of the machine's python3: point the environment at the folders that hold torch and numpy.
for mod in torch numpy; do
  if ! "$venv/bin/python" -c "import $mod" 2>/dev/null; then
    dir=$(python3 -c "import $mod, os; print(os.path.dirname(os.path.dirname($mod.__file__)))") &&
      echo "$dir" >"$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/machine-$mod.pth" &&
      echo "environment: $mod from $dir"
  fi
done
"${pip[@]}" install -q "${wheels[@]}" "scikit-build-core>=0.10" "nanobind>=2.0" pytest || exit 3
"$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

step "pip install . (build-gpu/python)"
# The Debian build dependencies from .devdeps, as CMake arguments (semicolon-separated).
SKBUILD_CMAKE_ARGS=$(IFS=';'; echo "${cmake_deps[*]}")
export SKBUILD_CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
if ! timeout -k 10 600 "${pip[@]}" install -q --no-build-isolation --no-deps \
       -C build-dir="$root/build-gpu/python" .; then
  echo "gpu-python: the package did not build"
  exit 3
fi
"$venv/bin/python" -c 'import strata; print("strata", strata.__version__, "cuda built",
  strata.cuda_built(), "gpu", strata.gpu_available())'

phase=${STRATA_PY_PHASE:-all}
if [ "$phase" = all ] || [ "$phase" = tests ]; then
  step "GPU tests of the package (pytest -m gpu)"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -m gpu ${STRATA_PY_TESTS:+-k "$STRATA_PY_TESTS"} \
    python/tests || failed+=("GPU tests")
fi
if [ "$phase" = all ] || [ "$phase" = bench ]; then
  step "Llama decoder layer: eager vs torch.compile vs backend=strata"
  # shellcheck disable=SC2086
  "$venv/bin/python" bench/llama_layer.py --out "$out" ${STRATA_LLAMA_ARGS:-} ||
    failed+=("Llama layer benchmark")
fi

step "done"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'gpu-python: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "gpu-python: all passed"
