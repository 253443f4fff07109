# strata: top-level entry points. Every target installs what it needs first.
#   make build   configure and build (the tool lands at build/strata)
#   make test    build and run the CPU test suite, C++ then Python (what CI runs)
#   make demo    build and run the main job on the bundled RMSNorm example
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
BUILD_TYPE ?= Release
# ccache, when installed, compiles once for the tool's build and the Python package's.
export CMAKE_CXX_COMPILER_LAUNCHER ?= $(if $(shell command -v ccache 2>/dev/null),ccache,)

.PHONY: all deps configure build test python-test demo clean format

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	       -DCMAKE_POSITION_INDEPENDENT_CODE=ON >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE gpu
	@JOBS=$(JOBS) scripts/python-test.sh

# The Python package (docs/python.md): pip install . into a cached venv, then its CPU tests.
python-test: deps
	@JOBS=$(JOBS) scripts/python-test.sh

demo: build
	@scripts/demo.sh $(BUILD)/strata

format:
	@find include src tools tests python/src -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	@rm -rf $(BUILD)
