# strata: top-level entry points. Every target installs what it needs first.
#   make build   configure and build (the tool lands at build/strata)
#   make test    build and run the CPU test suite (what CI runs)
#   make demo    build and run the main job on the bundled RMSNorm example
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
BUILD_TYPE ?= Release

.PHONY: all deps configure build test demo clean format

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE gpu

demo: build
	@scripts/demo.sh $(BUILD)/strata

format:
	@find include src tools tests -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	@rm -rf $(BUILD)
