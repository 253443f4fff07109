#!/usr/bin/env bash
# Builds the Python package with pip (scikit-build-core, the same `pip install .` users run)
# into a cached virtual environment and runs its CPU tests (docs/python.md, "Tests"), then the
# tests of the benchmark's PyTorch interpreter (bench/tests/test_torch_program.py) with it.
#
# The environment lives outside the tree ($STRATA_PYENV, default ~/.cache/strata/pyenv-pyXY) so
# that a fresh checkout or `rm -rf build` does not download PyTorch again; it is re-provisioned
# when python/requirements-*.txt change. The C++ build directory is build/python (one full
# compile per clean build; ccache, when installed, serves the objects `make build` compiled).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
tag=$("$PY" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
VENV=${STRATA_PYENV:-$HOME/.cache/strata/pyenv-$tag}
REQS=(python/requirements-test.txt python/requirements-torch.txt)
want=$(cat "${REQS[@]}" | sha256sum | cut -d' ' -f1)
stamp="$VENV/.strata-requirements"

if [ ! -x "$VENV/bin/python" ]; then
  echo "python-test: creating $VENV" >&2
  "$PY" -m venv "$VENV" || {
    echo "python-test: '$PY -m venv' failed; install the venv module (Debian: python3-venv)" >&2
    exit 1
  }
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "python-test: installing the test requirements into $VENV (first run: a few minutes)" >&2
  "${pip[@]}" install -q --upgrade pip
  "${pip[@]}" install -q -r python/requirements-test.txt
  "${pip[@]}" install -q --no-deps -r python/requirements-torch.txt
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    # The pinned set no longer satisfies torch's imports: take torch with all its dependencies.
    echo "python-test: torch does not import with the pinned set; installing it whole" >&2
    "${pip[@]}" install -q "$(grep -m1 '^torch==' python/requirements-torch.txt)"
  fi
  echo "$want" > "$stamp"
fi

if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
# The compiler of `make build` (CMake's choice, often /usr/bin/c++), so that ccache sees the same
# command lines; scikit-build-core would otherwise take Python's (often g++).
if [ -z "${CXX:-}" ] && [ -f build/CMakeCache.txt ]; then
  CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' build/CMakeCache.txt)
  [ -n "$CXX" ] && export CXX
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc 2>/dev/null || echo 2)}
echo "python-test: pip install . (build directory build/python)" >&2
start=$(date +%s)
"${pip[@]}" install -q --no-build-isolation --no-deps -C build-dir=build/python .
echo "python-test: package built and installed in $(( $(date +%s) - start )) s" >&2

# Tests run against the installed package, from outside the source tree's python/ directory.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not gpu" python/tests "$@"

# The benchmark's PyTorch interpreter (bench/torch_program.py) against the reference interpreter:
# its tests need torch, which this environment has and the CTest run may not (they skip there).
echo "python-test: bench/tests/test_torch_program.py (the suite's PyTorch baselines)" >&2
STRATA_TOOL=${STRATA_TOOL:-$PWD/build/strata} "$VENV/bin/python" -m unittest discover \
  -s bench/tests -p test_torch_program.py

# The megakernel benchmark's PyTorch model against a float64 NumPy model (bench/mpk_decode.py).
echo "python-test: bench/tests/test_mpk_decode.py (the megakernel's PyTorch reference)" >&2
STRATA_TOOL=${STRATA_TOOL:-$PWD/build/strata} "$VENV/bin/python" -m unittest discover \
  -s bench/tests -p test_mpk_decode.py
