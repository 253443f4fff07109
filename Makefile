# strata: top-level entry points. Every target installs what it needs first.
#   make build   configure and build (the tool lands at build/strata); BUILD=dir picks another
#                build directory, CMAKE_ARGS=... adds configure options
#                (e.g. -DSTRATA_ENABLE_CUDA=OFF: a build without the GPU runtime)
#   make test    build and run the CPU test suite, C++ then Python (what CI runs)
#   make demo    build and run the main job on the bundled RMSNorm example
#   make install build, then install into PREFIX (default /usr/local): tool, libraries,
#                headers, runtime headers and the CMake package (README "Using strata from CMake")
BUILD ?= build
PREFIX ?= /usr/local
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
BUILD_TYPE ?= Release
CMAKE_ARGS ?=
# ccache, when installed, compiles once for the tool's build and the Python package's.
export CMAKE_CXX_COMPILER_LAUNCHER ?= $(if $(shell command -v ccache 2>/dev/null),ccache,)

.PHONY: all deps configure build test python-test demo install clean format

all: build

deps:
	@scripts/install-deps.sh

# The configure log is kept in $(BUILD)/configure.log; its strata lines (what is built, which
# tests are left out and why) are shown.
configure: deps
	@mkdir -p $(BUILD) && cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	    -DCMAKE_POSITION_INDEPENDENT_CODE=ON $(CMAKE_ARGS) \
	    >$(BUILD)/configure.log || { cat $(BUILD)/configure.log; exit 1; }
	@grep -e '^-- strata:' $(BUILD)/configure.log || true

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

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

format:
	@find include src tools tests python/src -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	@rm -rf $(BUILD)
